"""`offsets migrate`'s library: a group run the old way (ZooKeeper offsets) moves into the
broker's offset manager and resumes there, in kafka-python, confluent-kafka and kafkactl's
group consumers, with nothing skipped or repeated."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kafkactl.client import offsets_migrate as om
from kafkactl.client.consumer import SimpleConsumer
from kafkactl.client.group.group_admin import GroupAdmin
from kafkactl.client.producer import Producer
from kafkactl.cluster import consumer_registry as registry
from kafkactl.cluster import zookeeper as zkmod
from tests.cluster.test_broker_registration import wait_for
from tests.cluster.test_zookeeper_consumer import Runner

TOPICS = ("m-a", "m-b", "m-c")
PARTITIONS = 4


@pytest.fixture
def env(broker_factory, zookeeper) -> Iterator[tuple[object, str, object]]:
    connect = f"{zookeeper.connect}/om-{uuid.uuid4().hex[:8]}"
    b = broker_factory(zookeeper_connect=connect, num_partitions=str(PARTITIONS))
    zk = zkmod.connect(connect, timeout_s=10)
    try:
        wait_for(lambda: zk.exists("/brokers/ids/0"), what="broker registration")
        yield b, connect, zk
    finally:
        zkmod.close(zk)


def produce(bootstrap: str, per_partition: int, start: int) -> None:
    p = Producer(bootstrap_servers=bootstrap, linger_ms=1)
    try:
        futs = [p.send(t, f"{t}/{part}/{i}".encode(), partition=part)
                for t in TOPICS for part in range(PARTITIONS)
                for i in range(start, start + per_partition)]
        for f in futs:
            f.result(30)
    finally:
        p.close()


def run_migrate(b, zk, groups, **kw) -> list[om.GroupResult]:  # type: ignore[no-untyped-def]
    sc = SimpleConsumer(b.bootstrap)
    try:
        return om.migrate(zk, GroupAdmin(sc.client), sc, groups, **kw)
    finally:
        sc.close()


def broker_offsets(b, group: str) -> dict[tuple[str, int], int]:  # type: ignore[no-untyped-def]
    sc = SimpleConsumer(b.bootstrap)
    try:
        return {tp: o for tp, o in GroupAdmin(sc.client).fetch_offsets(group).items()
                if o >= 0}
    finally:
        sc.close()


def legacy_group(b, connect: str, group: str) -> None:  # type: ignore[no-untyped-def]
    """Run the group the old way over the first 30 records of every partition."""
    produce(b.bootstrap, 30, 0)
    runners = [Runner(connect, group, t) for t in TOPICS]
    wait_for(lambda: sum(len(r.values) for r in runners) == 30 * PARTITIONS * len(TOPICS),
             what="legacy consumption")
    for r in runners:
        r.close()


def test_migrate_then_every_client_resumes_exactly(env) -> None:
    b, connect, zk = env
    group = "legacy"
    legacy_group(b, connect, group)
    produce(b.bootstrap, 20, 30)  # what the migrated group has still to read
    want_zk = {(t, p): 30 for t in TOPICS for p in range(PARTITIONS)}
    assert {tp: s.offset for tp, s in registry.read_offsets(zk, group).items()} == want_zk

    dry = run_migrate(b, zk, [group], dry_run=True)
    assert dry[0].count(om.WOULD_MIGRATE) == 12
    assert broker_offsets(b, group) == {}  # a dry run writes nothing
    assert {tp: s.offset for tp, s in registry.read_offsets(zk, group).items()} == want_zk

    res = run_migrate(b, zk, [group])
    assert res[0].error is None and res[0].count(om.MIGRATED) == 12
    assert broker_offsets(b, group) == want_zk
    assert registry.read_offsets(zk, group) != {}  # nothing deleted without --delete-source

    want = sorted(f"{t}/{p}/{i}" for t in TOPICS for p in range(PARTITIONS)
                  for i in range(30, 50))

    from kafka import KafkaConsumer
    kp = KafkaConsumer(*TOPICS, bootstrap_servers=b.bootstrap, group_id=group,
                       enable_auto_commit=False, auto_offset_reset="earliest")

    def kp_poll(timeout_ms: int) -> list[str]:
        return [m.value.decode() for recs in kp.poll(timeout_ms=timeout_ms).values()
                for m in recs]

    got = []
    wait_for(lambda: got.extend(kp_poll(300)) or len(got) >= len(want), what="kafka-python")
    got += kp_poll(1000)  # anything past what was migrated would show up here
    kp.close(autocommit=False)
    assert sorted(got) == want

    from confluent_kafka import Consumer as CKConsumer
    ck = CKConsumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    ck.subscribe(list(TOPICS))
    got = []
    deadline_polls = 0
    while len(got) < len(want) and deadline_polls < 60:
        m = ck.poll(0.5)
        deadline_polls += m is None
        if m is not None and not m.error():
            got.append(m.value().decode())
    extra = ck.poll(1.0)
    ck.close()
    assert sorted(got) == want and (extra is None or extra.error())

    from kafkactl.client.group.consumer import GroupConsumer
    gc = GroupConsumer(*TOPICS, group_id=group, bootstrap_servers=b.bootstrap,
                       enable_auto_commit=False, auto_offset_reset="earliest")
    got = []
    try:
        wait_for(lambda: got.extend(bytes(r.value).decode() for recs in gc.poll(300).values()
                                    for r in recs) or len(got) >= len(want),
                 what="kafkactl group consumer")
        for recs in gc.poll(500).values():
            got += [bytes(r.value).decode() for r in recs]
    finally:
        gc.close()
    assert sorted(got) == want


def test_conflicts_invalid_values_and_delete_source(env) -> None:
    b, connect, zk = env
    group = "odd"
    produce(b.bootstrap, 10, 0)
    registry.write_offsets(zk, group, {("m-a", 0): 5, ("m-a", 1): 7, ("m-a", 2): 3})
    zk.create(f"/consumers/{group}/offsets/m-a/3", b"abc", makepath=True)
    zk.create(f"/consumers/{group}/offsets/m-b/0", b"-5", makepath=True)
    zk.create(f"/consumers/{group}/offsets/m-b/1", b"1000000", makepath=True)
    zk.create(f"/consumers/{group}/offsets/nosuchtopic/0", b"1", makepath=True)
    sc = SimpleConsumer(b.bootstrap)
    try:  # the broker already holds a newer offset for m-a/1
        assert GroupAdmin(sc.client).commit_offsets(group, {("m-a", 1): 9}) == {("m-a", 1): 0}
    finally:
        sc.close()

    res = run_migrate(b, zk, [group], delete_source=True)[0]
    status = {(r.topic, r.partition): r.status for r in res.rows}
    assert status == {("m-a", 0): om.MIGRATED, ("m-a", 1): om.AHEAD,
                      ("m-a", 2): om.MIGRATED, ("m-a", 3): om.INVALID,
                      ("m-b", 0): om.NO_OFFSET, ("m-b", 1): om.BEYOND_END,
                      ("nosuchtopic", 0): om.UNKNOWN}
    assert res.error and "kept the ZooKeeper offsets" in res.error
    assert len(registry.read_offsets(zk, group)) == 7  # nothing deleted: not all verified
    sc = SimpleConsumer(b.bootstrap)
    try:
        cluster = sc.client.refresh_metadata(None)
        assert "nosuchtopic" not in cluster.topics  # reported, not created
    finally:
        sc.close()
    assert broker_offsets(b, group) == {("m-a", 0): 5, ("m-a", 1): 9, ("m-a", 2): 3}

    # --overwrite takes the conflict and the offset past the log end; the garbage stays.
    res = run_migrate(b, zk, [group], overwrite=True)[0]
    status = {(r.topic, r.partition): r.status for r in res.rows}
    assert status[("m-a", 1)] == om.OVERWRITTEN and status[("m-b", 1)] == om.MIGRATED
    assert status[("m-a", 0)] == om.EQUAL and status[("m-a", 3)] == om.INVALID
    assert broker_offsets(b, group)[("m-a", 1)] == 7

    # Clean the garbage away: now every partition verifies and --delete-source deletes.
    for path in ("m-a/3", "m-b/0", "nosuchtopic/0"):
        zk.delete(f"/consumers/{group}/offsets/{path}")
    res = run_migrate(b, zk, [group], delete_source=True)[0]
    assert res.error is None and all(r.deleted for r in res.rows)
    assert registry.read_offsets(zk, group) == {}


def test_an_interrupted_migration_converges(env) -> None:
    b, connect, zk = env
    group = "halfway"
    produce(b.bootstrap, 10, 0)
    zk_offsets = {(t, p): p + 1 for t in TOPICS for p in range(PARTITIONS)}
    registry.write_offsets(zk, group, zk_offsets)
    half = dict(list(zk_offsets.items())[:5])
    sc = SimpleConsumer(b.bootstrap)
    try:  # what a run killed after its first commit left behind
        GroupAdmin(sc.client).commit_offsets(group, half)
    finally:
        sc.close()
    res = run_migrate(b, zk, [group])[0]
    assert res.count(om.EQUAL) == 5 and res.count(om.MIGRATED) == 7
    assert broker_offsets(b, group) == zk_offsets
    again = run_migrate(b, zk, [group])[0]
    assert again.count(om.EQUAL) == 12


def test_unknown_group_is_reported(env) -> None:
    b, _, zk = env
    res = run_migrate(b, zk, ["nobody"])
    assert res[0].error == "no group 'nobody' in ZooKeeper (/consumers)"
    assert broker_offsets(b, "nobody") == {}
