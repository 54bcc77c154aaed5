"""`kafkactl offsets migrate` judged as Kafka judges: a broker offset newer than the
ZooKeeper one means the partition was migrated already (Kafka's consumer resumes from the
larger, ZookeeperConsumerConnector.fetchOffsets: zkOffset.max(kafkaOffset)), so it is
kept, counts as verified and lets --delete-source go on; only --overwrite (ZooKeeper's
offsets win) rewinds it, saying so; an older broker offset is still replaced. A ZooKeeper
value is read with Long.parseLong's rules: `+14` is 14, a negative one is no offset (done,
not invalid: it does not block --delete-source), `12\\n` is invalid and shown escaped in
its one table row. --zookeeper-timeout is also how long connecting may take."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.consumer import SimpleConsumer
from kafkactl.client.group.group_admin import GroupAdmin
from kafkactl.cluster import consumer_registry as registry
from kafkactl.cluster import zookeeper as zkmod
from tests import zygote
from tests.cluster.zk import ZooKeeperServer, available
from tests.polling import wait_until


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    server = ZooKeeperServer(Path(tmp_path_factory.mktemp("zookeeper")))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def env(broker_factory: Any, zookeeper: ZooKeeperServer) -> Iterator[tuple[Any, str, Any]]:
    chroot = f"{zookeeper.connect}/omk-{uuid.uuid4().hex[:8]}"
    b = broker_factory(zookeeper_connect=chroot, num_partitions="1",
                       group_initial_rebalance_delay_ms="0")
    zk = zkmod.connect(chroot, timeout_s=10)
    try:
        wait_until(lambda: zk.exists("/brokers/ids/0"), what="broker registration")
        yield b, chroot, zk
    finally:
        zkmod.close(zk)


def kafkactl(*args: str) -> Any:
    return zygote.run(list(args), text=True, timeout=120)


def migrate(chroot: str, b: Any, *args: str) -> Any:
    return kafkactl("offsets", "migrate", "--zookeeper", chroot, "-b", b.bootstrap, *args)


def produce(b: Any, topic: str, n: int, partition: int = 0) -> None:
    r = zygote.run(["produce", "-t", topic, "-p", str(partition), "-b", b.bootstrap, "-q"],
                   input=b"r\n" * n, timeout=60)
    assert r.returncode == 0, r.stderr


def broker_offsets(b: Any, group: str) -> dict[tuple[str, int], int]:
    sc = SimpleConsumer(b.bootstrap)
    try:
        return {tp: o for tp, o in GroupAdmin(sc.client).fetch_offsets(group).items()
                if o >= 0}
    finally:
        sc.close()


def commit(b: Any, group: str, offsets: dict[tuple[str, int], int]) -> None:
    sc = SimpleConsumer(b.bootstrap)
    try:
        assert GroupAdmin(sc.client).commit_offsets(group, offsets) == dict.fromkeys(offsets, 0)
    finally:
        sc.close()


def rows_of(stdout: str) -> dict[tuple[str, str], dict[str, Any]]:
    (group,) = json.loads(stdout)["groups"]
    return {(p["topic"], p["znode"].rsplit("/", 1)[1]): p for p in group["partitions"]}


def test_a_newer_broker_offset_is_already_migrated(env: tuple[Any, str, Any]) -> None:
    b, chroot, zk = env
    produce(b, "mc", 100)
    # the group went on committing to the broker only (Kafka's migration: dual commit,
    # then kafka storage alone): the broker is at 90, ZooKeeper frozen at 40
    registry.write_offsets(zk, "mcg", {("mc", 0): 40})
    commit(b, "mcg", {("mc", 0): 90})

    r = migrate(chroot, b, "-G", "mcg", "--dry-run", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    row = rows_of(r.stdout)[("mc", "0")]
    assert row["status"] == "already migrated" and row["broker_before"] == 90, row
    assert "newer offset 90: kept" in row["note"], row

    r = migrate(chroot, b, "-G", "mcg", "--delete-source")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "already migrated (source deleted)" in r.stdout, r.stdout
    assert "group mcg: 1 already migrated" in r.stdout, r.stdout
    assert "conflict" not in r.stdout and "error" not in r.stderr, (r.stdout, r.stderr)
    assert broker_offsets(b, "mcg") == {("mc", 0): 90}  # never rewound
    assert zk.exists("/consumers/mcg/offsets/mc/0") is None  # the source is gone

    # a broker offset behind ZooKeeper's is replaced by it, as before
    registry.write_offsets(zk, "behind", {("mc", 0): 60})
    commit(b, "behind", {("mc", 0): 20})
    r = migrate(chroot, b, "-G", "behind", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    row = rows_of(r.stdout)[("mc", "0")]
    assert row["status"] == "overwritten" and row["broker_after"] == 60, row
    assert broker_offsets(b, "behind") == {("mc", 0): 60}

    # --overwrite: ZooKeeper's offsets win, as documented, and the rewind is said
    registry.write_offsets(zk, "rewind", {("mc", 0): 40})
    commit(b, "rewind", {("mc", 0): 90})
    r = migrate(chroot, b, "-G", "rewind", "--overwrite", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    row = rows_of(r.stdout)[("mc", "0")]
    assert row["status"] == "overwritten" and row["broker_after"] == 40, row
    assert "rewinds the broker's newer offset 90" in row["note"], row
    assert "50 record(s) to consume again" in row["note"], row
    assert broker_offsets(b, "rewind") == {("mc", 0): 40}


def odd_group(env: tuple[Any, str, Any], group: str,
              values: dict[tuple[str, str], bytes]) -> None:
    """Topics t1 and t2 of two partitions, 20 records each, and `group`'s znodes."""
    b, _chroot, zk = env
    for topic in ("t1", "t2"):
        r = kafkactl("topics", "create", "-t", topic, "--partitions", "2", "-b", b.bootstrap)
        assert r.returncode == 0, r.stderr
        for partition in (0, 1):
            produce(b, topic, 20, partition)
    for (topic, name), value in values.items():
        zk.create(f"/consumers/{group}/offsets/{topic}/{name}", value, makepath=True)


def test_a_negative_zookeeper_offset_is_no_offset(env: tuple[Any, str, Any]) -> None:
    b, chroot, zk = env
    odd_group(env, "neg", {("t1", "0"): b"5", ("t2", "0"): b"-1"})
    r = migrate(chroot, b, "-G", "neg", "--dry-run", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    rows = rows_of(r.stdout)
    assert rows[("t2", "0")]["status"] == "no offset", rows
    assert "negative offset -1" in rows[("t2", "0")]["note"], rows

    # it does not block --delete-source, and goes with the others
    r = migrate(chroot, b, "-G", "neg", "--delete-source", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    rows = rows_of(r.stdout)
    assert {k: v["status"] for k, v in rows.items()} == {
        ("t1", "0"): "migrated", ("t2", "0"): "no offset"}, rows
    assert all(v["deleted_from_zookeeper"] for v in rows.values()), rows
    assert broker_offsets(b, "neg") == {("t1", 0): 5}
    assert zk.get_children("/consumers/neg/offsets/t1") == []
    assert zk.get_children("/consumers/neg/offsets/t2") == []


def test_a_signed_or_other_script_number_is_read_as_java_reads_it(
        env: tuple[Any, str, Any]) -> None:
    b, chroot, zk = env
    odd_group(env, "sig", {("t1", "1"): b"+14",
                           ("t2", "1"): "\u0663".encode()})  # Arabic-Indic 3: 3 to Java
    r = migrate(chroot, b, "-G", "sig", "--delete-source", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    rows = rows_of(r.stdout)
    assert {k: v["status"] for k, v in rows.items()} == {
        ("t1", "1"): "migrated", ("t2", "1"): "migrated"}, rows
    assert broker_offsets(b, "sig") == {("t1", 1): 14, ("t2", 1): 3}


def test_an_invalid_value_is_shown_escaped_in_its_one_row(env: tuple[Any, str, Any]) -> None:
    b, chroot, zk = env
    odd_group(env, "nl", {("t1", "0"): b"12\n", ("t1", "1"): b"13"})
    r = migrate(chroot, b, "-G", "nl", "--dry-run")
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    rows = [line for line in lines if line.startswith(" t1 ")]
    assert [row.split()[:3] for row in rows] == [["t1", "0", "'12\\n'"], ["t1", "1", "13"]], \
        r.stdout
    assert " invalid " in rows[0] and rows[0].endswith(" not a number: '12\\n'"), r.stdout
    assert not any(line.strip() in ("", "'") for line in lines), r.stdout
    assert "group nl: 1 invalid, 1 would migrate" in r.stdout, r.stdout


def test_the_zookeeper_timeout_bounds_the_connection() -> None:
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        r = kafkactl("offsets", "migrate", "--zookeeper", f"127.0.0.1:{port}/kafka",
                     "--all-groups", "-b", "127.0.0.1:1", "--zookeeper-timeout", "3")
    assert r.returncode == 1, r.stderr
    assert f"cannot reach ZooKeeper at 127.0.0.1:{port}/kafka (--zookeeper) within 3 s" \
        in r.stderr, r.stderr
