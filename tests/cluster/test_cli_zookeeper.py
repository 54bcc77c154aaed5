"""The ZooKeeper side of the CLI, end to end: `serve --zookeeper`, `produce --zookeeper`,
`consume --zookeeper -G`, `rebalance --zookeeper`, `offsets migrate`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from kafkactl.cluster import consumer_registry as registry
from kafkactl.cluster import zookeeper as zkmod
from tests import zygote
from tests.cluster.test_broker_registration import wait_for
from tests.conftest import BrokerProcess, free_port

KAFKACTL = [sys.executable, "-m", "kafkactl"]


def run(*args: str, stdin: bytes = b"", timeout: float = 90) -> subprocess.CompletedProcess:
    return zygote.run(list(args), input=stdin, timeout=timeout)


@pytest.fixture
def zk_env(zookeeper, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A broker started with `serve --zookeeper` (the flag, not an override)."""
    connect = f"{zookeeper.connect}/cli-{uuid.uuid4().hex[:8]}"
    data = tmp_path / "data"
    data.mkdir()
    # no initial rebalance delay: each broker-coordinated group here has one member
    b = BrokerProcess(data, free_port(), {"num.partitions": "4",
                                          "group.initial.rebalance.delay.ms": "0"},
                      extra_args=["--zookeeper", connect])
    b.start()
    zk = zkmod.connect(connect, timeout_s=10)
    try:
        wait_for(lambda: zk.exists("/brokers/ids/0"), what="registration")
        yield b, connect, zk
    finally:
        zkmod.close(zk)
        b.kill()


def test_produce_and_consume_through_zookeeper(zk_env, tmp_path: Path) -> None:
    b, connect, zk = zk_env
    lines = b"".join(b"rec %d\n" % i for i in range(4000))
    r = run("produce", "--zookeeper", connect, "-t", "zt", stdin=lines)
    assert r.returncode == 0, r.stderr  # brokers found in /brokers/ids, no -b

    outs = [tmp_path / f"c{i}.out" for i in range(2)]
    procs = [subprocess.Popen(KAFKACTL + ["consume", "--zookeeper", connect, "-G", "cli-g",
                                          "-t", "zt", "--from-beginning", "-q"],
                              stdout=open(o, "wb"), stderr=subprocess.PIPE)  # noqa: SIM115
             for o in outs]
    try:
        def owners_split() -> bool:
            owners = registry.owners(zk, "cli-g")
            return len(owners) == 4 and len({o.rsplit("-", 1)[0] for o in owners.values()}) == 2

        wait_for(owners_split, timeout=60, what="two members sharing four partitions")
        wait_for(lambda: sum(o.read_bytes().count(b"\n") for o in outs) >= 4000, timeout=60,
                 what="every record")
        procs[0].send_signal(signal.SIGTERM)  # leaves: commits, releases, exits 0
        assert procs[0].wait(30) == 0, procs[0].stderr.read() if procs[0].stderr else b""
        wait_for(lambda: set(registry.owners(zk, "cli-g").values()) and all(
            o.rsplit("-", 1)[0] != "" for o in registry.owners(zk, "cli-g").values())
            and len({o.rsplit("-", 1)[0] for o in registry.owners(zk, "cli-g").values()}) == 1
            and len(registry.owners(zk, "cli-g")) == 4, timeout=60, what="handover")
        more = b"".join(b"rec %d\n" % i for i in range(4000, 5000))
        assert run("produce", "--zookeeper", connect, "-t", "zt", stdin=more).returncode == 0
        wait_for(lambda: sum(o.read_bytes().count(b"\n") for o in outs) >= 5000, timeout=60,
                 what="records after the handover")
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(30)
    got = Counter(line for o in outs for line in o.read_bytes().splitlines())
    assert set(got) == {b"rec %d" % i for i in range(5000)}
    assert max(got.values()) == 1
    stored = {tp: s.offset for tp, s in registry.read_offsets(zk, "cli-g").items()}
    assert sum(stored.values()) == 5000 and len(stored) == 4  # committed on the way out


def test_rebalance_shows_and_triggers_a_zookeeper_group(zk_env) -> None:
    b, connect, zk = zk_env
    assert run("produce", "-b", b.bootstrap, "-t", "rt", stdin=b"x\n").returncode == 0
    proc = subprocess.Popen(KAFKACTL + ["consume", "--zookeeper", connect, "-G", "rg",
                                        "-t", "rt", "-q"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        wait_for(lambda: len(registry.owners(zk, "rg")) == 4, timeout=60, what="owners")
        r = run("rebalance", "--zookeeper", connect, "-G", "rg", "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        (member,) = doc["members"]
        assert member["subscription"] == {"rt": 1}
        assert member["current"] == member["range"] == [f"rt-{p}" for p in range(4)]
        r = run("rebalance", "--zookeeper", connect, "-G", "rg", "--trigger", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["settled"] is True
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    r = run("rebalance", "--zookeeper", connect, "-G", "nosuchgroup")
    assert r.returncode == 1 and b"no group 'nosuchgroup'" in r.stderr


def test_offsets_migrate_cli(zk_env) -> None:
    b, connect, zk = zk_env
    data = b"".join(b"m %d\n" % i for i in range(400))
    assert run("produce", "-b", b.bootstrap, "-t", "mt", "-p", "0", stdin=data).returncode == 0
    registry.write_offsets(zk, "old", {("mt", 0): 150})

    r = run("offsets", "migrate", "--zookeeper", connect, "-b", b.bootstrap, "-G", "old",
            "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    (group,) = json.loads(r.stdout)["groups"]
    assert group["partitions"][0]["status"] == "would migrate"
    shown = run("offsets", "show", "-b", b.bootstrap, "-G", "old", "--json")
    assert b'"committed": 150' not in shown.stdout  # the dry run wrote nothing

    r = run("offsets", "migrate", "--zookeeper", connect, "-b", b.bootstrap, "-G", "old")
    assert r.returncode == 0, r.stderr
    assert b"migrated" in r.stdout and b"group old: 1 migrated" in r.stdout

    # The migrated group resumes in kafkactl's own group consumer exactly at 150.
    r = run("consume", "-b", b.bootstrap, "-G", "old", "-t", "mt", "-e", "-q")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [b"m %d" % i for i in range(150, 400)]

    # The broker is ahead after that consume: already migrated, kept (Kafka takes the larger).
    r = run("offsets", "migrate", "--zookeeper", connect, "-b", b.bootstrap, "-G", "old")
    assert r.returncode == 0 and b"already migrated" in r.stdout


def test_an_interrupted_migrate_converges(zk_env) -> None:
    b, connect, zk = zk_env
    for p in range(4):
        assert run("produce", "-b", b.bootstrap, "-t", "it", "-p", str(p),
                   stdin=b"a\n" * 10).returncode == 0
    want = {("it", p): p + 1 for p in range(4)}
    for g in ("k1", "k2", "k3"):
        registry.write_offsets(zk, g, want)
    proc = subprocess.Popen(KAFKACTL + ["offsets", "migrate", "--zookeeper", connect, "-b",
                                        b.bootstrap, "--all-groups"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.8)  # wherever it is then (maybe done, maybe not started): kill -9
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    r = run("offsets", "migrate", "--zookeeper", connect, "-b", b.bootstrap, "--all-groups",
            "--json")
    assert r.returncode == 0, r.stderr
    for g in json.loads(r.stdout)["groups"]:
        assert {(x["topic"], x["partition"]): x["broker_after"] for x in g["partitions"]} \
            == want
        assert {x["status"] for x in g["partitions"]} <= {"migrated", "already equal"}


def test_unreachable_zookeeper_is_one_line(tmp_path: Path) -> None:
    port = free_port()
    commands = (["offsets", "migrate", "--zookeeper", f"127.0.0.1:{port}", "-G", "g"],
                ["consume", "--zookeeper", f"127.0.0.1:{port}", "-G", "g", "-t", "t"],
                ["rebalance", "--zookeeper", f"127.0.0.1:{port}", "-G", "g"])
    # each waits out its whole connection timeout: run the three side by side
    procs = [subprocess.Popen(KAFKACTL + args, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for args in commands]
    results = [p.communicate(timeout=60)[1] for p in procs]
    for args, p, stderr in zip(commands, procs, results, strict=True):
        assert p.returncode == 1, (args, stderr)
        err = stderr.decode()
        assert err.startswith("error: cannot reach ZooKeeper at 127.0.0.1:"), err
        assert "Traceback" not in err and err.count("\n") == 1, err
