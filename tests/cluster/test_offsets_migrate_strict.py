"""`kafkactl offsets migrate`, strictly: every znode under /consumers/G/offsets is reported
(a value Long.parseLong refuses, or a name that is not a partition number, is invalid,
never skipped nor read leniently) and blocks --delete-source, saying so; an offset below the
log start is flagged; a group with live members on the broker is said to be one; a group
with nothing to migrate is a success; a group named twice runs once; JSON has null for no
broker offset; a mistyped chroot is an error, with no Python warning."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactl.cluster import zookeeper as zkmod
from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.cluster.test_broker_registration import wait_for
from tests.groups.helpers import RawMember, connect


@pytest.fixture
def env(broker_factory: Any, zookeeper: Any) -> Iterator[tuple[Any, str, Any]]:
    chroot = f"{zookeeper.connect}/oms-{uuid.uuid4().hex[:8]}"
    b = broker_factory(zookeeper_connect=chroot, num_partitions="1",
                       group_initial_rebalance_delay_ms="0")
    zk = zkmod.connect(chroot, timeout_s=10)
    try:
        wait_for(lambda: zk.exists("/brokers/ids/0"), what="broker registration")
        yield b, chroot, zk
    finally:
        zkmod.close(zk)


def migrate(chroot: str, b: Any, *args: str) -> Any:
    return zygote.run(["offsets", "migrate", "--zookeeper", chroot, "-b", b.bootstrap, *args],
                      text=True, timeout=60)


def test_every_znode_is_reported_and_odd_offsets_are_flagged(env: Any) -> None:
    b, chroot, zk = env
    assert zygote.run(["produce", "-t", "st", "-p", "0", "-b", b.bootstrap],
                      input=b"r\n" * 10, timeout=60).returncode == 0
    conn = connect(b.bootstrap)
    try:  # the log now starts at 4
        r = conn.request(ApiKey.DELETE_RECORDS, {"topics": [{"name": "st", "partitions": [
            {"partition_index": 0, "offset": 4}]}], "timeout_ms": 5000}, version=2)
        assert r["topics"][0]["partitions"][0]["error_code"] == 0, r
    finally:
        conn.close()
    odd = {"0": "2", "x": "1", "-1": "1", "\u0665": "1", "01": "3", "1": "1_000",
           "2": "\u0663\u0663", "3": "+5", "4": " 7"}
    for name, value in odd.items():
        zk.create(f"/consumers/bad/offsets/st/{name}", value.encode(), makepath=True)

    r = migrate(chroot, b, "-G", "bad", "-G", "bad", "--delete-source", "--json")
    assert r.returncode == 1, r.stderr
    (group,) = json.loads(r.stdout)["groups"]  # named twice, migrated once
    rows = {p["znode"].rsplit("/", 1)[1]: p for p in group["partitions"]}
    assert set(rows) == set(odd)  # every znode reported
    assert rows["0"]["status"] == "below log start" and "log start offset is 4" in \
        rows["0"]["note"]
    assert rows["0"]["broker_before"] is None and rows["0"]["broker_after"] is None
    assert {n for n, p in rows.items() if p["status"] == "invalid"} == set(odd) - {"0", "2", "3"}
    # "\u0663\u0663" and "+5" are numbers to Long.parseLong (33, 5): checked, not invalid
    assert rows["2"]["status"] == rows["3"]["status"] == "unknown partition"
    assert rows["x"]["partition"] is None and rows["1"]["partition"] == 1
    assert "kept the ZooKeeper offsets" in group["error"]
    assert "6 invalid znode(s) to fix or delete by hand: /consumers/bad/offsets/st/" in \
        group["error"]
    assert sorted(zk.get_children("/consumers/bad/offsets/st")) == sorted(odd)  # kept

    # a group registered under /consumers that never committed: nothing to do, success
    zk.ensure_path("/consumers/idle/ids")
    r = migrate(chroot, b, "-G", "idle")
    assert r.returncode == 0, r.stderr
    assert "group idle: nothing to migrate" in r.stdout

    # a group whose broker group has a live member: said so, nothing committed
    zk.create("/consumers/live/offsets/st/0", b"6", makepath=True)
    member = RawMember(b.bootstrap, "live", ["st"])
    try:
        assert member.join()["error_code"] == 0
        assert member.sync({member.member_id: b""})["error_code"] == 0
        r = migrate(chroot, b, "-G", "live", "--json")
        assert r.returncode == 1
        (group,) = json.loads(r.stdout)["groups"]
        assert "has active members" in group["error"] and "stop its consumers" in \
            group["error"]
        assert group["partitions"][0]["status"] == "failed"
    finally:
        member.close()


def test_a_mistyped_chroot_is_an_error(zookeeper: Any) -> None:
    missing = f"{zookeeper.connect}/nochroot-{uuid.uuid4().hex[:8]}"
    for args in (["offsets", "migrate", "--zookeeper", missing, "--all-groups", "-b",
                  "127.0.0.1:1"],
                 ["rebalance", "--zookeeper", missing, "-G", "g"]):
        r = zygote.run(args, text=True, timeout=60)
        assert r.returncode == 1, (args, r.stderr)
        assert f"has no chroot /{missing.rsplit('/', 1)[1]}" in r.stderr, r.stderr
        assert "Warning" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    zk = zkmod.connect(zookeeper.connect, timeout_s=10)
    try:
        assert zk.exists("/" + missing.rsplit("/", 1)[1]) is None  # nothing was created
        empty = f"/empty-{uuid.uuid4().hex[:8]}"
        zk.ensure_path(empty)
    finally:
        zkmod.close(zk)
    r = zygote.run(["offsets", "migrate", "--zookeeper", zookeeper.connect + empty,
                    "--all-groups", "-b", "127.0.0.1:1"], text=True, timeout=60)
    assert r.returncode == 1 and "has no /consumers" in r.stderr, r.stderr


def test_offsets_of_a_deleted_topic(env: Any) -> None:
    """Kafka left a deleted topic's ZooKeeper offsets behind, so a group migrating years of
    them often has some: said to be a deleted topic (it said "(not created)"), and with
    --skip-deleted-topics they count as done, so the group verifies and --delete-source
    cleans it; a partition missing from a topic that exists stays an error, and so does a
    group none of whose topics is on this broker (likely the wrong -b)."""
    b, chroot, zk = env
    assert zygote.run(["produce", "-t", "kept", "-p", "0", "-b", b.bootstrap],
                      input=b"r\n" * 10, timeout=60).returncode == 0
    for path, value in (("kept/0", b"4"), ("gone/0", b"5"), ("gone/1", b"3")):
        zk.create(f"/consumers/g4/offsets/{path}", value, makepath=True)
    r = migrate(chroot, b, "-G", "g4", "--json")
    assert r.returncode == 1
    rows = {(p["topic"], p["partition"]): p for p in
            json.loads(r.stdout)["groups"][0]["partitions"]}
    assert rows[("gone", 0)]["status"] == "unknown partition"
    assert rows[("gone", 0)]["note"].startswith(
        "topic gone does not exist on the broker (deleted since? --skip-deleted-topics")
    r = migrate(chroot, b, "-G", "g4", "--skip-deleted-topics", "--delete-source", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {(p["topic"], p["partition"]): p for p in
            json.loads(r.stdout)["groups"][0]["partitions"]}
    assert rows[("kept", 0)]["status"] == "already equal"  # (committed by the first run)
    assert rows[("gone", 1)]["status"] == "skipped (topic deleted)"
    assert all(p["deleted_from_zookeeper"] for p in rows.values())
    assert zk.get_children("/consumers/g4/offsets/gone") == []

    # a partition the topic does not have; a group with no topic on this broker
    zk.create("/consumers/g5/offsets/kept/7", b"1", makepath=True)
    zk.create("/consumers/g6/offsets/elsewhere/0", b"1", makepath=True)
    r = migrate(chroot, b, "-G", "g5", "-G", "g6", "--skip-deleted-topics", "--json")
    assert r.returncode == 1
    g5, g6 = json.loads(r.stdout)["groups"]
    assert g5["partitions"][0]["note"] == ("kept-7 does not exist on the broker (the topic "
                                           "has 1 partitions)")
    assert g6["partitions"][0]["status"] == "unknown partition"
    assert "the right -b?" in g6["partitions"][0]["note"]


def test_a_group_not_in_zookeeper_is_an_error_only(env: Any) -> None:
    b, chroot, zk = env
    zk.ensure_path("/consumers/another")
    r = migrate(chroot, b, "-G", "nosuchgroup")
    assert r.returncode == 1
    assert r.stdout == ""  # not also "nothing to migrate"
    assert r.stderr.strip() == ("error: group nosuchgroup: no group 'nosuchgroup' in "
                                "ZooKeeper (/consumers)")
