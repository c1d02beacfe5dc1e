"""Config of upstreams with replicas: the TOML table, --upstream URL1,URL2, and bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptcache.errors import ConfigError
from promptcache.proxy.config import config_from_dict, load_config_file, upstream_from_spec
from promptcache.proxy.routing import POLICIES, RoutingSettings


def fleet(**table: object) -> dict[str, object]:
    return {"default_upstream": "fleet", "upstreams": {"fleet": table}}


def test_a_fleet_table_lists_replicas_and_its_routing(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(
        'default_upstream = "fleet"\n'
        "[upstreams.fleet]\n"
        'replicas = ["http://127.0.0.1:8001", "http://127.0.0.1:8002/"]\n'
        'policy = "prefix"\nload_margin = 2\nhealth_path = "/healthz"\n'
        "health_interval_s = 0.5\nmax_prefixes = 100\nread_timeout_s = 30\nload_ratio = 1.5\n",
        encoding="utf-8",
    )
    upstream = load_config_file(path).upstreams["fleet"]
    assert upstream.replicas == ("http://127.0.0.1:8001", "http://127.0.0.1:8002")
    assert upstream.url == "http://127.0.0.1:8001" and upstream.read_timeout_s == 30
    assert upstream.routing == RoutingSettings(
        policy="prefix", load_margin=2, health_path="/healthz", health_interval_s=0.5,
        max_prefixes=100, load_ratio=1.5,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "keys", "named"),
    [
        ("kv_events", {"load_ratio": 1.5}, "load_ratio, which policy 'kv_events' does not read"),
        ("round_robin", {"load_margin": 2}, "load_margin, which policy 'round_robin' does not"),
        (
            "least_loaded",
            {"prefix_ttl_s": 60, "max_prefixes": 10},
            "max_prefixes, prefix_ttl_s, which policy 'least_loaded' does not read",
        ),
    ],
)
def test_a_tuning_key_the_policy_does_not_read_is_refused(
    policy: str, keys: dict[str, object], named: str
) -> None:
    table = fleet(replicas=["http://a:1", "http://b:2"], policy=policy, **keys)
    with pytest.raises(ConfigError, match=r"\[upstreams\.fleet\]") as caught:
        config_from_dict(table, source="t")
    assert named in str(caught.value) and "remove" in str(caught.value)
    assert "'prefix'" in str(caught.value)  # who does read it
    one = len(keys) == 1
    assert ("it is read by" if one else "they are read by") in str(caught.value)
    assert str(caught.value).endswith("a policy that reads it" if one else "reads them")


def test_replicas_default_to_the_prefix_policy() -> None:
    config = config_from_dict(fleet(replicas=["http://a:1", "http://b:2"]), source="t")
    routing = config.upstreams["fleet"].routing
    assert routing is not None and routing.policy == "prefix"


def test_upstream_flag_takes_a_comma_separated_list() -> None:
    upstream = upstream_from_spec("http://127.0.0.1:8001, http://127.0.0.1:8002")
    assert upstream.replicas == ("http://127.0.0.1:8001", "http://127.0.0.1:8002")
    assert upstream.routing == RoutingSettings()
    assert upstream_from_spec("http://a:1,http://b:1", policy="round_robin").routing == (
        RoutingSettings(policy="round_robin")
    )
    assert upstream_from_spec("openai").replicas == ()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"replicas": []}, "non-empty list of base URLs"),
        ({"replicas": "http://a:1"}, "non-empty list of base URLs"),
        ({"replicas": ["http://a:1", "http://a:1"]}, "twice"),
        ({"replicas": ["ftp://a:1"]}, "neither one of"),
        ({"replicas": ["http://a:1"], "url": "http://b:1"}, "both `url` and `replicas`"),
        ({"url": "http://a:1", "policy": "prefix"}, "lists no `replicas`"),
        ({"replicas": ["http://a:1"], "policy": "fastest"}, "unknown routing policy 'fastest'"),
        ({"replicas": ["http://a:1"], "load_margin": -1}, "load_margin must be a whole number"),
        ({"replicas": ["http://a:1"], "load_ratio": 0.5}, "load_ratio must be a finite number"),
        ({"replicas": ["http://a:1"], "load_ratio": "2"}, "load_ratio must be a finite number"),
        ({"replicas": ["http://a:1"], "health_path": "health"}, "starting with '/'"),
        ({"replicas": ["http://a:1"], "prefix_ttl_s": 0}, "prefix_ttl_s must be a finite"),
        ({"replicas": ["http://a:1"], "max_prefixes": True}, "max_prefixes must be a whole"),
        ({"replicas": ["http://a:1"], "colour": "red"}, "unknown keys ['colour']"),
    ],
)
def test_bad_fleet_tables_say_what_to_change(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=r"\[upstreams.fleet\]") as err:
        config_from_dict(fleet(**table), source="f.toml")
    assert message in str(err.value)


@pytest.mark.parametrize("policy", [None, "round_robin"])
def test_kv_events_settings_without_that_policy_say_to_set_it(policy: str | None) -> None:
    # 'has unknown keys [kv_events_endpoints, tokenizer]; allowed: ...' listed neither them nor
    # the policy they need, though they are the kv_events policy's own keys
    table: dict[str, object] = {
        "replicas": ["http://a:1", "http://b:1"],
        "kv_events_endpoints": ["tcp://a:5557", "tcp://b:5557"],
        "tokenizer": "models/tiny",
    }
    if policy is not None:
        table["policy"] = policy
    with pytest.raises(ConfigError) as err:
        config_from_dict(fleet(**table), source="f.toml")
    assert str(err.value) == (
        "f.toml: [upstreams.fleet] sets kv_events_endpoints, tokenizer, settings of policy "
        f"'kv_events', but its policy is '{policy or 'prefix'}'; add policy = \"kv_events\" to "
        "route with them, or remove them"
    )


def test_a_policy_missing_from_this_build_is_an_error_not_a_silent_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(POLICIES, "kv_events")  # as in a build without it
    with pytest.raises(ConfigError, match="'kv_events' is not available in this promptcache"):
        config_from_dict(fleet(replicas=["http://a:1"], policy="kv_events"), source="f.toml")


@pytest.mark.parametrize(
    ("spec", "policy", "message"),
    [
        ("http://a:1,,http://b:1", None, "empty entry"),
        ("http://a:1,http://a:1", None, "twice"),
        ("openai", "prefix", "needs several replicas"),
        ("http://a:1,http://b:1", "nope", "unknown routing policy"),
    ],
)
def test_bad_upstream_lists(spec: str, policy: str | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        upstream_from_spec(spec, policy=policy)


@pytest.mark.parametrize(
    ("spec", "first", "second"),
    [
        ("http://LOCALHOST:8001,http://localhost:8001", "http://LOCALHOST:8001", None),
        ("http://gpu-1,http://gpu-1:80", "http://gpu-1", "http://gpu-1:80"),
        ("https://gpu-1:443,https://gpu-1/", "https://gpu-1:443", "https://gpu-1"),
        ("HTTP://gpu-1:8000,http://gpu-1:8000", "HTTP://gpu-1:8000", "http://gpu-1:8000"),
        ("http://u:secret99@gpu-1:8000,http://gpu-1:8000", "http://***@gpu-1:8000", None),
    ],
)
def test_one_server_spelt_two_ways_is_listed_twice(
    spec: str, first: str, second: str | None
) -> None:
    second = second or spec.split(",")[1]
    with pytest.raises(ConfigError) as err:
        upstream_from_spec(spec)
    assert f"lists {first} and {second}, one server spelt two ways" in str(err.value)
    assert "secret99" not in str(err.value)
    with pytest.raises(ConfigError, match="one server spelt two ways"):
        config_from_dict(fleet(replicas=spec.split(",")), source="f.toml")


@pytest.mark.parametrize(
    "spec",
    [
        "http://gpu-1:8000,http://gpu-1:8001",  # two ports
        "http://gpu-1,https://gpu-1",  # 80 and 443
        "http://gpu-1:8000/a,http://gpu-1:8000/b",  # two paths behind one gateway
        "http://gpu-1:8000,http://gpu-2:8000",
    ],
)
def test_two_servers_that_look_alike_are_two_replicas(spec: str) -> None:
    assert len(upstream_from_spec(spec).replicas) == 2
    config = config_from_dict(fleet(replicas=spec.split(",")), source="f.toml")
    assert len(config.upstreams["fleet"].replicas) == 2


def test_a_registered_policy_gets_its_own_keys_checked_and_kept_in_options() -> None:
    from promptcache.proxy.routing import PolicySpec, register_policy
    from promptcache.proxy.routing.policy import LeastLoadedPolicy

    def check(routing: RoutingSettings, replicas: tuple[str, ...]) -> None:
        endpoints = routing.options.get("endpoints")
        if not isinstance(endpoints, list) or len(endpoints) != len(replicas):
            raise ConfigError("endpoints must list one address per replica")

    register_policy(
        PolicySpec(
            "test_keys",
            lambda settings, replicas: LeastLoadedPolicy(),
            needs="a test endpoint per replica",
            keys=frozenset({"endpoints"}),
            check=check,
        )
    )
    try:
        table = {"replicas": ["http://a:1", "http://b:1"], "policy": "test_keys"}
        config = config_from_dict(fleet(**table, endpoints=["x", "y"]), source="f.toml")
        routing = config.upstreams["fleet"].routing
        assert routing is not None and routing.options == {"endpoints": ["x", "y"]}
        with pytest.raises(ConfigError, match="one address per replica"):
            config_from_dict(fleet(**table, endpoints=["x"]), source="f.toml")
        # not a key of the prefix policy: refused, naming the policy whose key it is
        with pytest.raises(ConfigError, match="settings of policy 'test_keys', but its policy"):
            config_from_dict(fleet(replicas=["http://a:1"], endpoints=["x"]), source="f.toml")
    finally:
        POLICIES.pop("test_keys")


def test_a_bad_routing_policy_lists_only_what_the_command_line_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # kv_events was listed among the choices although --routing-policy kv_events is refused
    with pytest.raises(ConfigError) as caught:
        upstream_from_spec("http://a:1,http://b:1", policy="bogus")
    assert str(caught.value) == (
        "unknown routing policy 'bogus'; --routing-policy takes one of least_loaded, prefix, "
        'round_robin (kv_events is set in a --config file: policy = "kv_events" in an '
        "[upstreams.NAME] table; docs/proxy.md, Routing by KV events)"
    )
    monkeypatch.delitem(POLICIES, "kv_events")  # as in a build without it
    with pytest.raises(ConfigError) as caught:
        upstream_from_spec("http://a:1,http://b:1", policy="bogus")
    assert str(caught.value) == (
        "unknown routing policy 'bogus'; --routing-policy takes one of least_loaded, prefix, "
        "round_robin"
    )
