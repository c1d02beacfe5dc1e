"""``--api-key``: the /v1 routes need the key, probes do not; non-loopback binds need a key."""

from __future__ import annotations

import httpx
import openai
import pytest
from click.testing import CliRunner
from server_support import TINYSTORIES, LiveServer, load_engine

from promptcache.cli import cli
from promptcache.engine.server import create_app
from promptcache.engine.server.auth import check_bind
from promptcache.errors import ConfigError


def test_v1_routes_need_the_key_probes_do_not() -> None:
    app = create_app(load_engine(num_blocks=32), served_model_names=["tiny"], api_key="s3cret")
    with LiveServer(app) as live:
        good = openai.OpenAI(base_url=f"{live.url}/v1", api_key="s3cret", max_retries=0)
        reply = good.completions.create(model="tiny", prompt="Hi", max_tokens=2)
        assert reply.usage is not None and reply.usage.completion_tokens == 2
        bad = openai.OpenAI(base_url=f"{live.url}/v1", api_key="guess", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as info:
            bad.completions.create(model="tiny", prompt="Hi", max_tokens=2)
        assert info.value.code == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        assert httpx.get(f"{live.url}/health").status_code == 200
        assert httpx.get(f"{live.url}/metrics").status_code == 200


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_loopback_needs_no_key(host: str) -> None:
    check_bind(host, None, False)


def test_other_hosts_need_a_key_or_an_explicit_opt_out() -> None:
    with pytest.raises(ConfigError, match="--api-key"):
        check_bind("0.0.0.0", None, False)
    check_bind("0.0.0.0", "key", False)
    check_bind("0.0.0.0", None, True)
    result = CliRunner().invoke(
        cli, ["engine", "serve", "--model", str(TINYSTORIES), "--host", "0.0.0.0"]
    )
    assert result.exit_code == 2
    assert "error:" in result.output and "--api-key" in result.output
