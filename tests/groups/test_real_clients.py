"""Real clients consume as a group on a real broker: no record missing or duplicated
across clean joins and leaves; offsets are shared between clients and survive restarts."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from typing import Any

import pytest

from tests.groups.helpers import (
    FAST,
    assigned_members,
    create_topic,
    offsets_show,
    produce,
    wait_until,
)


def _vals(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


def test_confluent_three_members_join_and_leave(broker_factory: Any) -> None:
    from confluent_kafka import Consumer, KafkaException

    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "cf", 6)
    seen: list[str] = []
    consumers: list[Any] = []

    def commit_on_revoke(c: Any, _parts: Any) -> None:
        with contextlib.suppress(KafkaException):  # nothing consumed yet
            c.commit(asynchronous=False)

    def member() -> Any:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "cf-group",
                      "auto.offset.reset": "earliest", "heartbeat.interval.ms": 500,
                      "session.timeout.ms": 10000})
        c.subscribe(["cf"], on_revoke=commit_on_revoke)
        consumers.append(c)
        return c

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for c in consumers:
                m = c.poll(0.05)
                if m is not None and not m.error():
                    seen.append(m.value().decode())

    produce(b.bootstrap, "cf", _vals("a", 300))
    member()
    wait_until(lambda: (pump(0.5), len(seen) >= 300)[1], 60, "the first member")  # type: ignore
    member()
    member()
    produce(b.bootstrap, "cf", _vals("b", 300))
    wait_until(lambda: (pump(0.5), len(seen) >= 600)[1], 60, "600 records")  # type: ignore
    assignments = [c.assignment() for c in consumers]
    assert sorted(len(a) for a in assignments) == [2, 2, 2]
    leaver = consumers.pop()
    leaver.close()  # clean leave: the others take its partitions over
    produce(b.bootstrap, "cf", _vals("c", 300))
    wait_until(lambda: (pump(0.5), len(seen) >= 900)[1], 60, "900 records")  # type: ignore
    pump(2)  # elapsed time is the point: a record read twice would show up here
    for c in consumers:
        c.close()
    expected = _vals("a", 300) + _vals("b", 300) + _vals("c", 300)
    assert sorted(seen) == sorted(expected)  # none missing, none twice
    shown = offsets_show(b.bootstrap, "cf-group")
    assert len(shown) == 6
    assert all(r["lag"] == 0 for r in shown.values())


def test_kafka_python_group_and_offsets_shared_with_confluent(broker_factory: Any) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "kp", 4)
    produce(b.bootstrap, "kp", _vals("x", 200))
    seen: list[str] = []
    lock = threading.Lock()
    stops = [threading.Event(), threading.Event()]

    def member(stop: threading.Event) -> None:
        # one thread per member: kafka-python blocks in poll() while it rejoins
        c = KafkaConsumer("kp", bootstrap_servers=b.bootstrap, group_id="kp-group",
                          auto_offset_reset="earliest", heartbeat_interval_ms=500)
        while not stop.is_set():
            # Not a short timeout: kafka-python 3.0.12 drops a join whose SyncGroup is
            # still in flight when poll() times out after the leader already computed the
            # assignment (need_rejoin() turns False first), leaving the member assigned
            # nothing for good; a 100 ms poll hit that about 1 run in 10.
            for recs in c.poll(timeout_ms=1000).values():
                with lock:
                    seen.extend(r.value.decode() for r in recs)
        c.close()  # commits (auto-commit) and leaves the group

    threads = [threading.Thread(target=member, args=(s,), daemon=True) for s in stops]
    try:
        threads[0].start()
        wait_until(lambda: len(seen) > 0, 60, "the first member")
        threads[1].start()
        wait_until(lambda: len(seen) >= 200, 60, "200 records")
        # the second member's join is complete: both hold partitions
        wait_until(lambda: assigned_members(b.bootstrap, "kp-group") == 2, 60, "the rebalance")
        stops[1].set()
        threads[1].join(30)
        produce(b.bootstrap, "kp", _vals("y", 100))
        wait_until(lambda: len(seen) >= 300, 60, "300 records")
    finally:
        for s in stops:
            s.set()
        for t in threads:
            t.join(30)
    assert sorted(seen) == sorted(_vals("x", 200) + _vals("y", 100))
    # confluent-kafka (librdkafka) sees kafka-python's commits, and so does kafkactl
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "kp-group"})
    got = c.committed([TopicPartition("kp", p) for p in range(4)], timeout=20)
    c.close()
    shown = offsets_show(b.bootstrap, "kp-group")
    ends = {p: shown[("kp", p)]["log_end_offset"] for p in range(4)}
    assert {tp.partition: tp.offset for tp in got} == ends
    assert sum(ends.values()) == 300
    # kafka-python reads what librdkafka commits
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "cf-commits"})
    c.commit(offsets=[TopicPartition("kp", 1, 7)], asynchronous=False)
    c.close()
    k = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="cf-commits")
    assert k.committed(KTP("kp", 1)) == 7
    k.close()


def _kcat(bootstrap: str, group: str, out: Any) -> subprocess.Popen[bytes]:
    # -X auto.offset.reset (not -o, which overrides committed offsets); -u: unbuffered
    return subprocess.Popen(["kcat", "-b", bootstrap, "-G", group,
                             "-X", "auto.offset.reset=earliest", "-f", "%s\n", "-q", "-u",
                             "-X", "heartbeat.interval.ms=500", "kc"],
                            stdout=out, stderr=subprocess.DEVNULL)


def test_kcat_group_then_restart_keeps_offsets(broker_factory: Any, tmp_path: Any) -> None:
    from kafka import KafkaConsumer

    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "kc", 6)
    produce(b.bootstrap, "kc", _vals("k", 200))
    outs = [tmp_path / "kcat1.out", tmp_path / "kcat2.out"]
    files = [open(p, "wb") for p in outs]  # noqa: SIM115
    procs = [_kcat(b.bootstrap, "kc-group", files[0])]

    def lines() -> list[str]:
        return [ln for p in outs for ln in p.read_text().splitlines()]

    try:
        wait_until(lambda: len(lines()) >= 200, 60, "kcat to read 200 records")
        procs.append(_kcat(b.bootstrap, "kc-group", files[1]))  # a second member joins
        wait_until(lambda: assigned_members(b.bootstrap, "kc-group") == 2, 60, "the rebalance")
        produce(b.bootstrap, "kc", _vals("m", 200))
        wait_until(lambda: len(lines()) >= 400, 60, "kcat members to read 400 records")
        time.sleep(1)  # elapsed time is the point: a record read twice would show up here
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)  # clean leave, final commit
        for p in procs:
            p.wait(20)
        for f in files:
            f.close()
    assert sorted(lines()) == sorted(_vals("k", 200) + _vals("m", 200))
    assert all(p.read_text() for p in outs)  # both members got partitions
    before = offsets_show(b.bootstrap, "kc-group")
    assert sum(r["current_offset"] for r in before.values()) == 400
    b.restart()
    after = offsets_show(b.bootstrap, "kc-group")
    assert {tp: r["current_offset"] for tp, r in after.items()} == \
        {tp: r["current_offset"] for tp, r in before.items()}
    # clients resume where the group left off: only the new records arrive
    produce(b.bootstrap, "kc", _vals("n", 50))
    k = KafkaConsumer("kc", bootstrap_servers=b.bootstrap, group_id="kc-group",
                      auto_offset_reset="earliest", consumer_timeout_ms=8000)
    got = [r.value.decode() for r in k]
    k.close()
    assert sorted(got) == sorted(_vals("n", 50))


@pytest.mark.parametrize("kill", [False, True])
def test_restart_restores_offsets_of_many_groups(broker_factory: Any, kill: bool) -> None:
    from kafkactl.client.group import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient

    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "many", 3)
    produce(b.bootstrap, "many", _vals("v", 30))
    client = KafkaClient(b.bootstrap)
    admin = GroupAdmin(client)
    expected = {}
    for g in range(40):
        offs = {("many", p): g + p for p in range(3)}
        assert not any(admin.commit_offsets(f"g{g}", offs).values())
        expected[f"g{g}"] = offs
    admin.commit_offsets("g0", {("many", 0): 9})  # a later commit wins
    expected["g0"][("many", 0)] = 9
    admin.close()
    client.close()
    if kill:
        b.kill()
        b.start()
    else:
        b.restart()
    client = KafkaClient(b.bootstrap)
    admin = GroupAdmin(client)
    try:
        for g, offs in expected.items():
            assert admin.fetch_offsets(g) == offs
    finally:
        admin.close()
        client.close()
