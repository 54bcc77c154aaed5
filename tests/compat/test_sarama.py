"""Sarama (Go), from Debian's golang-github-shopify-sarama-dev (1.22.1: Kafka 0.8.2 to 2.2
protocol versions), built from tests/compat/go/sarama_probe.go. Without go or that package
these tests skip and say why (scripts/install_test_clients.sh installs both).

Each run: one SyncProducer batch of several messages to one partition (acks=all), a
partition consumer reading them back, then (0.11+) ClusterAdmin.ListAcls without an
ApiVersions handshake followed by ListTopics on the same admin client."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess

SOURCE = Path(__file__).resolve().parent / "go" / "sarama_probe.go"
GOPATH = Path("/usr/share/gocode")
SARAMA = GOPATH / "src" / "github.com" / "Shopify" / "sarama"
COUNT = 5


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Every version writes a topic of its own (sarama-VERSION): one broker for the module."""
    return module_broker


def _missing() -> str | None:
    if shutil.which("go") is None:
        return "go is not installed (Debian: golang-go)"
    if not SARAMA.is_dir():
        return "Sarama is not installed (Debian: golang-github-shopify-sarama-dev)"
    return None


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = _missing()
    if reason:
        warnings.warn(f"Sarama tests skipped: {reason}", stacklevel=2)
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("sarama")
    # Go's build cache is content-addressed (an entry is never stale): a lasting one makes
    # every build after the first on a machine take a second instead of compiling Sarama
    cache = os.environ.get("GOCACHE") or str(Path.home() / ".cache" / "kafkactl-tests" / "go")
    env = dict(os.environ, GO111MODULE="off", GOPATH=str(GOPATH), GOFLAGS="", GOCACHE=cache)
    binary = out / "sarama_probe"
    build = subprocess.run(["go", "build", "-o", str(binary), str(SOURCE)], env=env,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return binary


def _run(probe: Path, bootstrap: str, version: str) -> dict[str, Any]:
    proc = subprocess.run([str(probe), bootstrap, version, f"sarama-{version}", str(COUNT)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("version", [
    "0.8.2.0", "0.10.0.0", "0.10.2.0", "0.11.0.0", "1.0.0", "2.0.0", "2.2.0"])
def test_sarama_produce_consume_and_admin(broker, probe: Path, version: str) -> None:
    out = _run(probe, broker.bootstrap, version)
    assert out["produce_error"] == "", out
    assert out["produced"] == list(range(COUNT))
    assert out["consume_error"] == "" and out["consumed"] == [f"v{i}" for i in range(COUNT)]
    if tuple(int(x) for x in version.split(".")) >= (0, 11):
        # Sarama 1.22 drops DescribeAcls' error code; what matters is that the broker
        # answered and the admin client's next call on that connection still works.
        assert out["acl_error"] is not None and out["admin_error"] == "", out
        assert out["topics_after_acl"] >= 1
