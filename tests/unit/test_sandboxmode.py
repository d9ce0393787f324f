"""Sandbox mode as configuration: the mode.json the sandbox writes (clusterkit_sandbox.client)
read by the product (clusterkit.sandboxmode): trusted only while its daemon lives, URLs on
loopback only, another version refused naming both, and turned into the environment
every process clusterkit starts inherits (the recovery controller's on the master too)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from clusterkit import sandboxmode
from clusterkit.errors import NetworkSafetyError, SandboxError
from clusterkit.sandboxmode import MODE_FILE, Mode
from clusterkit_sandbox import client, credentials, imds
from clusterkit_sandbox.node import VIEW_IN_NODE
from clusterkit_sandbox.state import DAEMON_MODULE
from clusterkit_sandbox.timings import Timings

ENDPOINT = "http://127.0.0.1:40123"


@pytest.fixture
def where(tmp_path: Path) -> Path:
    return tmp_path / "sandbox"


@pytest.fixture
def daemon(where: Path) -> Iterator[int]:
    """A process whose command line names the daemon's module and the state dir, as the
    sandbox's daemon's does (it only sleeps)."""
    where.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)",
                             DAEMON_MODULE, str(where)])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _write(where: Path, mode: Mode, **changes: object) -> None:
    (where / MODE_FILE).write_text(json.dumps({**mode.to_json(), **changes}))


def test_the_sandboxs_mode_reads_back_as_written(where, daemon):
    timed = client.mode(where, ENDPOINT, daemon, Timings(0.1))
    client.hand_over(where, ENDPOINT, daemon, Timings(0.1))
    assert sandboxmode.read_mode(where) == timed
    assert timed.address_map == str(where / "addresses.json")
    assert timed.node_address_map == f"{VIEW_IN_NODE}/addresses.json"
    assert timed.time_scale == 0.1 and client.mode(where, ENDPOINT, 1, Timings()).time_scale is None
    # the URL the product makes of it is the one the sandbox serves the instance's at
    env = {sandboxmode.METADATA_URL_ENV: timed.metadata_url}
    assert sandboxmode.metadata_url("i-0abc", env) == imds.instance_url(ENDPOINT, "i-0abc") \
        == f"{ENDPOINT}/_clusterkit/imds/i-0abc"


def _credentials(where: Path) -> None:
    """The credentials' files as the daemon writes them at its start."""
    credentials.write(where, credentials.Keys())


def test_the_environment_of_sandbox_mode(where, daemon):
    client.hand_over(where, ENDPOINT, daemon, Timings(0.25))
    _credentials(where)
    real = {"AWS_PROFILE": "real-account", "AWS_ACCESS_KEY_ID": "AKIAREAL",
            "AWS_SECRET_ACCESS_KEY": "real", "AWS_SESSION_TOKEN": "real",
            "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token", "AWS_ROLE_ARN": "arn:real"}
    env = {**real, "CLUSTERKIT_TIME_SCALE": "0.5"}
    values = sandboxmode.apply(env, str(where))
    assert env == {**values, "AWS_DEFAULT_REGION": "us-east-1"}  # none of ``real`` left
    assert values == {
        "AWS_ENDPOINT_URL": ENDPOINT,
        "AWS_SHARED_CREDENTIALS_FILE": str(where / "auth" / "credentials"),
        "AWS_CONFIG_FILE": str(where / "auth" / "config"),
        "AWS_EC2_METADATA_DISABLED": "true", "CLUSTERKIT_CALLER_CIDR": "127.0.0.1/32",
        "CLUSTERKIT_SANDBOX": "1", "CLUSTERKIT_ADDRESS_MAP": str(where / "addresses.json"),
        "CLUSTERKIT_SANDBOX_METADATA_URL": f"{ENDPOINT}/_clusterkit/imds/{{instance_id}}",
        "CLUSTERKIT_SANDBOX_NODE_ADDRESS_MAP": f"{VIEW_IN_NODE}/addresses.json",
        "CLUSTERKIT_SANDBOX_DIR": str(where), "CLUSTERKIT_TIME_SCALE": "0.25"}
    client.hand_over(where, ENDPOINT, daemon, Timings())  # untimed: AWS's pace
    sandboxmode.apply(env, str(where))
    assert "CLUSTERKIT_TIME_SCALE" not in env


def test_nothing_running_is_the_sandbox_not_running(where, daemon, tmp_path):
    def refused() -> str:
        with pytest.raises(SandboxError) as info:
            sandboxmode.read_mode(where)
        assert info.value.hint == "start it with `clusterkit sandbox start`"
        return info.value.message

    assert refused() == f"the sandbox is not running (state dir {where})"  # no file
    mode = client.mode(where, ENDPOINT, daemon, Timings())
    for pid in (None, "1", 2 ** 22 + 7, 1):  # no pid, not a pid, no process, not the daemon
        _write(where, mode, pid=pid)
        refused()
    _write(where, mode, daemon="something.else")
    refused()
    other = tmp_path / "other"
    other.mkdir()
    _write(other, mode)  # the daemon of another state dir
    with pytest.raises(SandboxError, match="not running"):
        sandboxmode.read_mode(other)
    (where / MODE_FILE).write_text('{"pid": ')  # not JSON
    refused()


def test_another_version_is_refused_naming_both(where, daemon):
    for other in (1, 3):  # 1: before the credentials' files
        _write(where, client.mode(where, ENDPOINT, daemon, Timings()), version=other)
        with pytest.raises(SandboxError) as info:
            sandboxmode.read_mode(where)
        assert f"clusterkit-sandbox-mode version {other}" in info.value.message
        assert "reads clusterkit-sandbox-mode version 2" in info.value.message
    assert "clusterkit-sandbox" in (info.value.hint or "")


def test_an_address_off_loopback_is_refused(where, daemon):
    mode = client.mode(where, ENDPOINT, daemon, Timings())
    for bad in (replace(mode, endpoint="http://203.0.113.9:5000"),
                replace(mode, endpoint="https://ec2.us-east-1.amazonaws.com"),
                replace(mode, metadata_url="http://169.254.169.254/{instance_id}")):
        _write(where, bad)
        with pytest.raises(NetworkSafetyError, match="off loopback"):
            sandboxmode.read_mode(where)


@pytest.mark.parametrize("change", [
    {"address_map": "addresses.json"}, {"node_address_map": None},
    {"metadata_url": f"{ENDPOINT}/_clusterkit/imds/"}, {"time_scale": 2},
    {"time_scale": "0.1"}, {"caller_cidr": 127}, {"credentials_file": None},
    {"config_file": "auth/config"},
])
def test_a_file_that_is_not_a_usable_configuration_is_refused(where, daemon, change):
    _write(where, client.mode(where, ENDPOINT, daemon, Timings()), **change)
    with pytest.raises(SandboxError, match="is not a sandbox configuration clusterkit can use"):
        sandboxmode.read_mode(where)


def test_a_node_gets_the_map_and_metadata_where_it_sees_them_and_no_credentials(where, daemon):
    client.hand_over(where, ENDPOINT, daemon, Timings(0.1))
    _credentials(where)
    env = sandboxmode.sandbox_env(str(where))
    on_node = sandboxmode.node_env("i-0master", env)
    assert on_node == {
        "CLUSTERKIT_SANDBOX": "1", "AWS_ENDPOINT_URL": ENDPOINT,
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": f"{ENDPOINT}/_clusterkit/imds/i-0master/",
        "CLUSTERKIT_SANDBOX_METADATA_URL": env["CLUSTERKIT_SANDBOX_METADATA_URL"],
        "CLUSTERKIT_ADDRESS_MAP": f"{VIEW_IN_NODE}/addresses.json",
        "CLUSTERKIT_CALLER_CIDR": "127.0.0.1/32", "CLUSTERKIT_TIME_SCALE": "0.1"}
    without = {k: v for k, v in env.items() if k != "CLUSTERKIT_SANDBOX_NODE_ADDRESS_MAP"}
    with pytest.raises(SandboxError, match="CLUSTERKIT_SANDBOX_NODE_ADDRESS_MAP"):
        sandboxmode.node_env("i-0master", without)


def test_no_metadata_url_where_sandbox_mode_did_not_say():
    assert sandboxmode.metadata_url("i-1", {}) == ""
    assert sandboxmode.metadata_url("i-1", {sandboxmode.METADATA_URL_ENV: "http://x/"}) == ""


def test_a_sandbox_without_its_credentials_file_is_refused(where, daemon):
    """mode.json names a credentials file that is not there (a daemon of before, or one
    whose files were removed): no process is pointed at a file of no keys."""
    client.hand_over(where, ENDPOINT, daemon, Timings())
    with pytest.raises(SandboxError, match="no credentials file"):
        sandboxmode.sandbox_env(str(where))
    _credentials(where)
    assert sandboxmode.sandbox_env(str(where))["AWS_SHARED_CREDENTIALS_FILE"] == \
        str(where / "auth" / "credentials")
