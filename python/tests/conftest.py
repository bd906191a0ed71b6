"""Shared fixtures of rangeio's Python tests.

Tests that need the HTTP/S3 test servers (tests/servers/run_servers.sh) read
where they listen from the RANGEIO_TEST_* variables and skip without them,
unless RANGEIO_REQUIRE_SERVERS=1 (CI), where a missing server fails.
"""

import json
import os
import urllib.request

import pytest

import rangeio
import rangeio_testing


def _servers_required():
    return os.environ.get("RANGEIO_REQUIRE_SERVERS") == "1"


def server_env(name):
    """The value of RANGEIO_TEST_<name>, or skip (fail under CI)."""
    value = os.environ.get("RANGEIO_TEST_" + name)
    if not value:
        message = f"RANGEIO_TEST_{name} is not set: start tests/servers/run_servers.sh"
        if _servers_required():
            pytest.fail(message + " (RANGEIO_REQUIRE_SERVERS=1)")
        pytest.skip(message)
    return value


@pytest.fixture
def pattern_file(tmp_path):
    """A local file of 1 MiB + 13 bytes holding rangeio_testing.expected."""
    path = tmp_path / "pattern.bin"
    size = (1 << 20) + 13
    path.write_bytes(rangeio_testing.expected(0, size))
    return str(path), size


@pytest.fixture
def nginx():
    return server_env("NGINX")


@pytest.fixture
def s3_options():
    """Options and URL of pattern.bin in the s3rver bucket."""
    endpoint = server_env("S3_ENDPOINT")
    bucket = server_env("S3_BUCKET")
    opts = dict(endpoint=endpoint, region="us-east-1",
                access_key_id="S3RVER", secret_access_key="S3RVER",
                addressing="path")
    return f"s3://{bucket}/pattern.bin", opts


class FaultListener:
    """A faultproxy listener in front of nginx (deleted at teardown)."""

    def __init__(self, control, upstream, faults):
        self.control = control
        body = json.dumps({"upstream": upstream, "faults": faults}).encode()
        req = urllib.request.Request(control + "/listeners", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            self.port = json.load(resp)["port"]

    def close(self):
        req = urllib.request.Request(f"{self.control}/listeners/{self.port}",
                                     method="DELETE")
        urllib.request.urlopen(req, timeout=10).close()


@pytest.fixture
def fault_listener():
    control = server_env("PROXY_CONTROL")
    upstream = server_env("NGINX").removeprefix("http://")
    made = []

    def make(faults):
        listener = FaultListener(control, upstream, faults)
        made.append(listener)
        return f"http://127.0.0.1:{listener.port}"

    yield make
    for listener in made:
        listener.close()
