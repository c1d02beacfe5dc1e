"""Upstream names, the TOML routing file, and the bind guard."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from promptcache.errors import ConfigError
from promptcache.hosts import check_host
from promptcache.proxy.config import (
    ProxyConfig,
    check_bind,
    config_for_upstream,
    load_config_file,
    upstream_from_spec,
)
from promptcache.proxy.serve import unreachable_upstreams


def test_builtin_names_and_urls() -> None:
    assert upstream_from_spec("anthropic").url == "https://api.anthropic.com"
    assert upstream_from_spec("openai").vendor == "openai"
    assert upstream_from_spec("gemini").url == "https://generativelanguage.googleapis.com"
    engine = upstream_from_spec("engine")
    assert (engine.url, engine.vendor, engine.is_loopback) == (
        "http://127.0.0.1:8000",
        "engine",
        True,
    )
    custom = upstream_from_spec("http://10.1.2.3:8000/")
    assert (custom.url, custom.vendor, custom.is_loopback) == (
        "http://10.1.2.3:8000",
        "openai_compatible",
        False,
    )


@pytest.mark.parametrize(
    ("spec", "fix"),
    [
        ("antropic", "--upstream openai"),
        ("ftp://host", "http(s) URL"),
        ("http://host:8000/v1", "without it"),
        ("http://host:8000?x=1", "query"),
    ],
)
def test_bad_upstreams_say_what_to_change(spec: str, fix: str) -> None:
    with pytest.raises(ConfigError) as info:
        upstream_from_spec(spec)
    assert fix in str(info.value)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "proxy.toml"
    path.write_text(text)
    return path


def test_config_file_routes_by_model_then_path_then_default(tmp_path: Path) -> None:
    config = load_config_file(
        write(
            tmp_path,
            """
default_upstream = "anthropic"

[upstreams.local]
url = "http://127.0.0.1:9000"
vendor = "engine"
read_timeout_s = 30

[[routes]]
model_prefix = "local/"
upstream = "local"

[[routes]]
path_prefix = "/v1/chat/"
model_prefix = "gpt-"
upstream = "openai"
""",
        ),
        db_path=None,
    )
    assert config.upstreams["local"].read_timeout_s == 30
    assert config.select_upstream("/v1/chat/completions", "local/llama").name == "local"
    assert config.select_upstream("/v1/chat/completions", "gpt-4o").name == "openai"
    assert config.select_upstream("/v1/responses", "gpt-4o").name == "anthropic"
    assert config.select_upstream("/v1/messages", None).name == "anthropic"
    assert config.db_path is None


def _refused_url() -> str:
    """A loopback URL on a port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_the_start_up_check_tries_only_upstreams_a_request_can_reach(tmp_path: Path) -> None:
    # the built-ins (anthropic, openai, gemini, engine) and a table no route names get no
    # request, so no warning that "requests to it get 502"
    one, two, spare = _refused_url(), _refused_url(), _refused_url()
    text = (
        f'default_upstream = "fleet"\n[upstreams.fleet]\nreplicas = ["{one}", "{two}"]\n'
        f'[upstreams.spare]\nurl = "{spare}"\n'
    )
    config = load_config_file(write(tmp_path, text), db_path=None)
    assert {u.url for u, _ in unreachable_upstreams(config, timeout_s=1.0)} == {one, two}
    routed = text + '[[routes]]\nmodel_prefix = "spare/"\nupstream = "spare"\n'
    config = load_config_file(write(tmp_path, routed), db_path=None)
    assert {u.url for u, _ in unreachable_upstreams(config, timeout_s=1.0)} == {one, two, spare}


def test_cli_upstream_replaces_the_file_default(tmp_path: Path) -> None:
    path = write(tmp_path, 'default_upstream = "anthropic"\n')
    config = load_config_file(path, default=upstream_from_spec("http://127.0.0.1:7000"))
    assert config.select_upstream("/v1/messages", None).url == "http://127.0.0.1:7000"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("default_upstream = 'nowhere'\n", "default upstream 'nowhere' is not defined"),
        ("[[routes]]\nupstream = 'openai'\n", "needs path_prefix or model_prefix"),
        (
            "default_upstream = 'openai'\n[[routes]]\nmodel_prefix = 'x'\nupstream = 'gone'\n",
            "names upstream 'gone'",
        ),
        (
            "default_upstream = 'openai'\n[upstreams.x]\nurl = 'http://h'\nspeed = 3\n",
            "unknown keys",
        ),
        ("default_upstream = 'openai'\n[upstreams.x]\nvendor = 'engine'\n", "needs a url"),
        ("colour = 'blue'\n", "unknown top-level keys"),
        ("default_upstream = [\n", "not valid TOML"),
        ("[upstreams.local]\nurl = 'http://h'\n", "set default_upstream"),
    ],
)
def test_bad_config_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config_file(write(tmp_path, text))
    assert message in str(info.value)


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="max_body_bytes"):
        config_for_upstream("openai", max_body_bytes=0)
    with pytest.raises(ConfigError, match="flush_interval_s"):
        config_for_upstream("openai", flush_interval_s=2.0)
    assert isinstance(config_for_upstream("engine"), ProxyConfig)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_binds_need_no_token(host: str) -> None:
    check_bind(host, None, False)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.5", "::", "myhost.example"])
def test_other_binds_need_a_token_or_an_explicit_opt_out(host: str) -> None:
    with pytest.raises(ConfigError, match="--auth-token"):
        check_bind(host, None, False)
    check_bind(host, "token", False)
    check_bind(host, None, True)


_OPENAI = "default_upstream = 'openai'\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_OPENAI + "[upstreams.x]\nurl = 5\n", "url must be a string"),
        (_OPENAI + "[upstreams.x]\nurl = 'http://[bad'\n", "http(s) URL"),
        (_OPENAI + "[upstreams.openai]\nread_timeout_s = -1\n", "read_timeout_s"),
        (_OPENAI + "[upstreams.openai]\nconnect_timeout_s = 'fast'\n", "connect_timeout_s"),
        (_OPENAI + "[upstreams.openai]\npool_timeout_s = inf\n", "pool_timeout_s"),
        (_OPENAI + "[upstreams.openai]\nmax_connections = 0\n", "max_connections"),
        (_OPENAI + "[upstreams.openai]\nmax_connections = 2.5\n", "max_connections"),
        (_OPENAI + "[upstreams.openai]\nvendor = 7\n", "vendor"),
        (_OPENAI + "upstreams = 'x'\n", "[upstreams.NAME] tables"),
        (_OPENAI + "upstreams = {x = 5}\n", "[upstreams.NAME] tables"),
        (_OPENAI + "routes = 'x'\n", "[[routes]] tables"),
        (_OPENAI + "routes = [1]\n", "[[routes]] tables"),
        ("default_upstream = 3\n", "default_upstream must be"),
    ],
)
def test_wrong_types_in_config_files_name_the_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config_file(write(tmp_path, text))
    assert message in str(info.value)


def test_an_unparsable_upstream_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="http"):
        upstream_from_spec("http://[bad")


def test_a_config_file_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin.toml"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match=r"latin\.toml is not UTF-8 text"):
        load_config_file(path)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:99999", "http://127.0.0.1:0", "http://h:abc", "https://h:-1"]
)
def test_an_upstream_port_outside_1_to_65535_is_refused_at_once(url: str) -> None:
    with pytest.raises(ConfigError, match="invalid port; give a port from 1 to 65535"):
        upstream_from_spec(url)


def test_credentials_in_an_upstream_url_are_masked_wherever_it_is_shown(tmp_path: Path) -> None:
    upstream = upstream_from_spec("http://user:pw@127.0.0.1:8000/base")
    assert upstream.url == "http://user:pw@127.0.0.1:8000/base"  # the request still uses them
    assert upstream.display_url == "http://***@127.0.0.1:8000/base"
    for bad in ("http://user:pw@127.0.0.1:99999", "http://user:pw@h/v1", "http://user:pw@h?x=1"):
        with pytest.raises(ConfigError) as info:
            upstream_from_spec(bad)
        assert "user:pw" not in str(info.value) and "***@" in str(info.value)
    text = "default_upstream = 'x'\n[upstreams.x]\nurl = 'https://k:p@ss@h:70000'\n"
    with pytest.raises(ConfigError) as info:
        load_config_file(write(tmp_path, text))
    assert "k:p" not in str(info.value) and "ss@" not in str(info.value)


def test_an_auth_token_too_short_to_redact_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"at least 8.*openssl rand -hex 32"):
        config_for_upstream("openai", auth_token="tok123")
    assert config_for_upstream("openai", auth_token="tok12345").auth_token == "tok12345"


@pytest.mark.parametrize("host", ["not a host", "bad..name", "a" * 70])
def test_an_unknown_host_is_named_as_such(host: str) -> None:
    with pytest.raises(ConfigError, match="is an unknown host"):
        check_host(host)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "0.0.0.0", "[::]"])
def test_addresses_are_known_hosts(host: str) -> None:
    check_host(host)
