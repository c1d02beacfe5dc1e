"""The seconds options of `promptcache proxy` and `promptcache engine serve` refuse nan and inf.

float() accepts both and a NaN passes click's range check, so `--header-timeout nan` started a
proxy whose first request failed with a traceback in the event loop's timer
(`ValueError: cannot convert float NaN to integer`), and `--shutdown-timeout nan` failed the
same way at the stop. They are usage errors now (exit 2, no traceback), naming the option.
"""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from promptcache.cli import cli


def _free_port() -> str:
    """A port nothing listens on now: the engine checks its port before its model, so a busy
    default port (8000) would end the command with another error."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


SERVERS = {
    # each fails right after its options are read (a log folder, a model that is not there),
    # so a value the option check lets through ends the command rather than starting a server
    "proxy": ["proxy", "--upstream", "engine", "--db", "no-such-folder/log.db"],
    "engine serve": ["engine", "serve", "--model", "no-such-model-folder", "--port", _free_port()],
}


@pytest.mark.parametrize("server", sorted(SERVERS))
@pytest.mark.parametrize("option", ["--header-timeout", "--body-timeout", "--keep-alive-timeout"])
@pytest.mark.parametrize("value", ["nan", "inf", "NaN", "Infinity"])
def test_a_client_timeout_that_is_not_a_finite_number_is_a_usage_error(
    server: str, option: str, value: str
) -> None:
    result = CliRunner().invoke(cli, [*SERVERS[server], option, value])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}': {value!r} is not a finite number" in result.output
    assert "give seconds > 0" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_the_proxy_shutdown_timeout_is_a_finite_number(value: str) -> None:
    result = CliRunner().invoke(cli, [*SERVERS["proxy"], "--shutdown-timeout", value])
    assert result.exit_code == 2, result.output
    assert f"{value!r} is not a finite number; give seconds >= 0" in result.output


def test_finite_values_still_pass_the_option_check() -> None:
    # 0 is a valid --shutdown-timeout (no wait) but not a client timeout
    zero = CliRunner().invoke(cli, [*SERVERS["proxy"], "--header-timeout", "0"])
    assert zero.exit_code == 2 and "0.0 is not in the range x>0" in zero.output
    # a finite value gets past the options to the model check
    for server, folder in (("engine serve", "no-such-model-folder"), ("proxy", "no-such-folder")):
        ok = CliRunner().invoke(cli, [*SERVERS[server], "--header-timeout", "2.5"])
        assert ok.exit_code == 2 and folder in ok.output, ok.output
        assert "--header-timeout" not in ok.output
