"""Where the proxy logs: ``--db`` and ``[log] db`` take a SQLite file or a ``postgresql://``
URL; the command line wins over the file; without Postgres the tests say how to get it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import cli
from promptcache.errors import ConfigError
from promptcache.proxy.config import config_from_dict
from promptcache.proxy.dialect import is_postgres_url

URL = "postgresql://proxy@db.internal:5432/promptcache"


def test_log_db_in_the_config_file() -> None:
    base = {"default_upstream": "openai"}
    assert config_from_dict({**base, "log": {"db": URL}}, source="f").db_path == URL
    assert config_from_dict({**base, "log": {"db": "x.db"}}, source="f").db_path == Path("x.db")
    assert config_from_dict(base, source="f").db_path == Path("promptcache.db")
    # --db and --no-log win over the file
    assert config_from_dict(
        {**base, "log": {"db": URL}}, source="f", db_path=Path("a.db")
    ).db_path == Path("a.db")
    assert config_from_dict({**base, "log": {"db": URL}}, source="f", db_path=None).db_path is None


@pytest.mark.parametrize("log", [{"db": 3}, {"path": "x.db"}, "x.db"])
def test_a_bad_log_table_is_one_line(log: object) -> None:
    with pytest.raises(ConfigError, match=r"\[log\] may only set db"):
        config_from_dict({"default_upstream": "openai", "log": log}, source="f")


@pytest.mark.parametrize("db", ["", "  "])
def test_an_empty_log_db_is_refused_not_taken_for_the_default_file(db: str) -> None:
    # db = "" (a URL left out of a template) logged to ./promptcache.db without a word
    with pytest.raises(ConfigError) as refused:
        config_from_dict({"default_upstream": "openai", "log": {"db": db}}, source="f")
    assert str(refused.value) == (
        "f: [log] db is empty; give a SQLite file path or a postgresql://user@host/dbname URL, "
        "or leave db out for promptcache.db"
    )


def test_postgres_urls() -> None:
    assert is_postgres_url(URL) and is_postgres_url("postgres://u@h/d")
    assert is_postgres_url("POSTGRESQL://u@h/d")
    assert not is_postgres_url("postgresql.db") and not is_postgres_url(Path("postgresql://x"))


OTHER_URLS = [
    (
        "postgresql+psycopg://proxy:s3cret-pw@db.internal/promptcache",
        "postgresql+psycopg://***@db.internal/promptcache names a SQLAlchemy driver; the log "
        "takes libpq's URL: drop '+psycopg' (postgresql://user@host/dbname)",
    ),
    (
        "mysql://proxy:s3cret-pw@db.internal/promptcache",
        "mysql://***@db.internal/promptcache is a mysql:// URL; the log is a SQLite file path "
        "or a postgresql://user@host/dbname URL",
    ),
    (
        "sqlite:///promptcache.db",
        "sqlite:///promptcache.db: a SQLite log is given by its file path, not a sqlite:// URL",
    ),
]


@pytest.mark.parametrize(("url", "message"), OTHER_URLS)
def test_a_url_of_another_scheme_is_refused_with_its_password_masked(
    url: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # taken for a SQLite path: 'cannot create the request log
    # postgresql+psycopg:/proxy:s3cret-pw@db.internal/promptcache: folder ... does not exist;
    # create it', the password printed and the advice wrong
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for args in (
        ["proxy", "--upstream", "openai", "--port", "1", "--db", url],
        ["report", "--db", url],
        ["log", "copy", "a.db", url],
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in " ".join(result.output.split()), (args, result.output)
        assert "s3cret-pw" not in result.output
    config = tmp_path / "proxy.toml"
    config.write_text(f'default_upstream = "openai"\n[log]\ndb = "{url}"\n')
    with pytest.raises(ConfigError) as refused:
        config_from_dict({"default_upstream": "openai", "log": {"db": url}}, source="proxy.toml")
    assert str(refused.value) == f"proxy.toml: [log] db: {message}"
    result = runner.invoke(cli, ["proxy", "--config", str(config), "--port", "1"])
    assert result.exit_code == 2 and "s3cret-pw" not in result.output, result.output
    assert message in " ".join(result.output.split()), result.output
    assert list(tmp_path.iterdir()) == [config]  # no file or folder made of the URL


def _refusals_of_the_log(url: str) -> list[str]:
    """What proxy, report and log copy print, white space folded, when each refuses ``url`` as
    the request log to read or write (each must exit with 2)."""
    outputs = []
    for args in (
        ["proxy", "--upstream", "openai", "--port", "1", "--db", url],
        ["report", "--db", url],
        ["log", "copy", url, "b.db"],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        outputs.append(" ".join(result.output.split()))
    return outputs


def test_a_password_with_a_bare_percent_is_not_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # libpq refuses '50%off' (not percent-encoded) and quotes it: 'invalid percent-encoded
    # token: "50%off-S3cret"', the password in clear under a URL shown as ***@
    pytest.importorskip("psycopg")
    monkeypatch.chdir(tmp_path)
    for output in _refusals_of_the_log("postgresql://proxy:50%off-S3cret@127.0.0.1:1/promptcache"):
        assert "S3cret" not in output and "50%off" not in output, output
        assert (
            "cannot connect to the request log postgresql://***@127.0.0.1:1/promptcache: invalid "
            'percent-encoded token: "***"; write a % in the user name or password as %25'
        ) in output


@pytest.mark.parametrize(
    ("userinfo", "quoted"),
    [("proxy:my S3cret", "***"), ("bad user:S3cret", "bad user")],
)
def test_a_space_in_the_user_name_or_password_does_not_print_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, userinfo: str, quoted: str
) -> None:
    # libpq refuses a space that is not percent-encoded; the URL around its message was shown
    # as given, password and all, since a URL's user:password@ part was taken to hold no space
    pytest.importorskip("psycopg")
    monkeypatch.chdir(tmp_path)
    for output in _refusals_of_the_log(f"postgresql://{userinfo}@127.0.0.1:1/promptcache"):
        assert "S3cret" not in output, output
        assert (
            "cannot connect to the request log postgresql://***@127.0.0.1:1/promptcache: "
            f'unexpected spaces found in "{quoted}"'
        ) in output


def test_a_short_password_is_not_masked_inside_the_words_of_the_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the password 'p' was masked wherever the letter stood: 'connection to server at
    # "127.0.0.1", ***ort 1 failed: Connection refused'
    pytest.importorskip("psycopg")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["report", "--db", "postgresql://u:p@127.0.0.1:1/x"])
    assert result.exit_code == 2, result.output
    assert (
        "cannot connect to the request log postgresql://***@127.0.0.1:1/x: connection failed: "
        'connection to server at "127.0.0.1", port 1 failed: Connection refused'
    ) in " ".join(result.output.split()), result.output


def test_without_postgres_the_tests_skip_with_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pg_server

    monkeypatch.setattr(pg_server, "_bin_dir", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install postgresql"):
        next(pg_server.start_server())
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run these tests"):
        next(pg_server.start_server())
