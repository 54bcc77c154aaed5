"""`kafkactl mirror` as a real process between two real single-broker clusters."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from kafkactl.client.admin import AdminClient
from kafkactl.client.group import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from tests.mirror.helpers import (
    FAST,
    assert_nothing_missing,
    assert_same,
    count,
    create_topics,
    mirrored,
    produce,
    read_topic,
    start_mirror,
)
from tests.polling import wait_until

TOPICS = {"dc1.orders": 3, "dc1.clicks": 2, "dc1.audit": 1}


def _clusters(broker_factory: Any) -> tuple[Any, Any]:
    return broker_factory(**FAST), broker_factory(**FAST)


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    client = KafkaClient(bootstrap)
    try:
        offsets = GroupAdmin(client).fetch_offsets(group, [(topic, p) for p in
                                                           range(partitions)])
        return {p: off for (_t, p), off in offsets.items()}
    finally:
        client.close()


def test_mirrors_regex_topics_while_producing_then_sigterm_commits(
        broker_factory: Any, tmp_path: Path) -> None:
    source, target = _clusters(broker_factory)
    create_topics(source.bootstrap, {**TOPICS, "dc1.secret": 1, "other": 1})
    produce(source.bootstrap, "dc1.orders", 0, 200, partitions=3)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap,
                     "--whitelist", r"dc1\..*", "--blacklist", r".*secret")
    # Keep producing into all three while the mirror runs.
    producers = [threading.Thread(target=produce, args=(source.bootstrap, t, 1000, 600),
                                  kwargs={"partitions": n}) for t, n in TOPICS.items()]
    for t in producers:
        t.start()
    for t in producers:
        t.join()
    total = 200 + 600 * len(TOPICS)
    wait_until(lambda: mirrored(m, total), 90, f"{total} records mirrored:\n{m.log()}")
    status = m.status()
    assert status is not None and status["state"] == "running"
    assert set(status["topics"]) == set(TOPICS)
    assert status["lag"] == 0 and status["skipped"] == 0
    assert m.terminate() == 0, m.log()
    final = m.status()
    assert final is not None and final["state"] == "stopped" and final["mirrored"] == total
    for topic in TOPICS:
        assert_same(read_topic(source.bootstrap, topic), read_topic(target.bootstrap, topic))
    with AdminClient(target.bootstrap) as admin:
        names = set(admin.list_topics(include_internal=False))
    assert "dc1.secret" not in names and "other" not in names
    # Everything acknowledged was committed before exiting.
    for topic, n in TOPICS.items():
        end = read_topic(source.bootstrap, topic)
        assert _committed(source.bootstrap, "kafkactl-mirror", topic, n) == {
            p: len(rows) for p, rows in end.items()}


def test_sigkill_twice_mid_stream_loses_nothing(broker_factory: Any, tmp_path: Path) -> None:
    source, target = _clusters(broker_factory)
    create_topics(source.bootstrap, TOPICS)
    total = 0
    done = threading.Event()

    def keep_producing() -> None:
        nonlocal total
        i = 0
        while not done.is_set() and i < 40:
            for topic, n in TOPICS.items():
                produce(source.bootstrap, topic, i * 500, 500, partitions=n)
            i += 1
            total += 500 * len(TOPICS)

    producer = threading.Thread(target=keep_producing)
    producer.start()
    try:
        for run in range(2):
            m = start_mirror(tmp_path, source.bootstrap, target.bootstrap,
                             "--whitelist", r"dc1\..*", name=f"mirror-{run}")
            seen = count_in_target_after(target.bootstrap, 3000 * (run + 1), m)
            assert seen
            m.kill()  # SIGKILL mid-stream: nothing flushed, nothing committed on the way out
        done.set()
    finally:
        done.set()
        producer.join()
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--whitelist", r"dc1\..*",
                     name="mirror-final")
    expected = {t: count(source.bootstrap, t) for t in TOPICS}
    wait_until(lambda: all(_committed_total(source.bootstrap, t, n) == expected[t]
                           for t, n in TOPICS.items()), 120,
               f"the last mirror to commit the end of every partition:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    for topic in TOPICS:
        assert_nothing_missing(read_topic(source.bootstrap, topic),
                               read_topic(target.bootstrap, topic))


def count_in_target_after(target: str, at_least: int, m: Any) -> bool:
    def enough() -> bool:
        assert m.proc.poll() is None, m.log()
        try:
            return sum(count(target, t) for t in TOPICS) >= at_least
        except Exception:
            return False
    return wait_until(enough, 120, f"{at_least} records in the target:\n{m.log()}")


def _committed_total(bootstrap: str, topic: str, partitions: int) -> int:
    return sum(max(0, o) for o in _committed(bootstrap, "kafkactl-mirror", topic,
                                             partitions).values())


def test_a_new_matching_topic_is_mirrored_while_running(broker_factory: Any,
                                                         tmp_path: Path) -> None:
    source, target = _clusters(broker_factory)
    create_topics(source.bootstrap, {"dc1.orders": 2})
    produce(source.bootstrap, "dc1.orders", 0, 100, partitions=2)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--whitelist", r"dc1\..*")
    wait_until(lambda: mirrored(m, 100), 60, f"the first topic mirrored:\n{m.log()}")
    create_topics(source.bootstrap, {"dc1.late": 4})
    produce(source.bootstrap, "dc1.late", 0, 300, partitions=4)
    wait_until(lambda: mirrored(m, 400), 60, f"the new topic mirrored:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    late = read_topic(target.bootstrap, "dc1.late")
    assert len(late) == 4  # created with the source's partition count
    assert_same(read_topic(source.bootstrap, "dc1.late"), late)


def test_a_target_with_fewer_partitions_gets_records_by_key(broker_factory: Any,
                                                             tmp_path: Path) -> None:
    source, target = _clusters(broker_factory)
    create_topics(source.bootstrap, {"keyed": 4})
    create_topics(target.bootstrap, {"copy": 2})
    produce(source.bootstrap, "keyed", 0, 400, partitions=4)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--topic", "keyed",
                     "--rename", "keyed:copy")
    wait_until(lambda: mirrored(m, 400), 60, f"mirrored:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    got = read_topic(target.bootstrap, "copy")
    assert len(got) == 2
    placed: dict[bytes | None, set[int]] = {}
    for p, rows in got.items():
        for key, *_ in rows:
            placed.setdefault(key, set()).add(p)
    assert len(placed) == 400 and all(len(ps) == 1 for ps in placed.values())
    src = read_topic(source.bootstrap, "keyed")
    want = sorted(r for rows in src.values() for r in rows)
    assert sorted(r for rows in got.values() for r in rows) == want


def test_copy_topic_configs_creates_the_target_like_the_source(broker_factory: Any,
                                                                tmp_path: Path) -> None:
    source, target = _clusters(broker_factory)
    create_topics(source.bootstrap, {"conf": 2}, {"retention.ms": "123456789",
                                                  "cleanup.policy": "delete",
                                                  "unclean.leader.election.enable": "true"})
    produce(source.bootstrap, "conf", 0, 10, partitions=2)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "conf",
                     "--copy-topic-configs")
    wait_until(lambda: mirrored(m, 10), 60, f"mirrored:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    with AdminClient(target.bootstrap) as admin:
        configs = admin.describe_configs("conf")
    assert configs["retention.ms"].value == "123456789"
    # a setting of the source cluster's replicas, never copied (MirrorMaker 2's filter)
    assert configs["unclean.leader.election.enable"].value == "false"


def test_target_restart_mid_run_loses_nothing(broker_factory: Any, tmp_path: Path) -> None:
    source, target = _clusters(broker_factory)
    create_topics(source.bootstrap, {"dc1.orders": 2})
    produce(source.bootstrap, "dc1.orders", 0, 2000, partitions=2)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "dc1.orders")
    wait_until(lambda: mirrored(m, 2000), 60, f"mirrored:\n{m.log()}")
    target.restart()
    source.restart()
    produce(source.bootstrap, "dc1.orders", 2000, 2000, partitions=2)
    wait_until(lambda: mirrored(m, 4000) or m.proc.poll() is not None, 120,
               f"mirrored after the restarts:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    assert_nothing_missing(read_topic(source.bootstrap, "dc1.orders"),
                           read_topic(target.bootstrap, "dc1.orders"))


def _batch_layout(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, int]]]:
    """(base offset, record count) of every batch, per partition."""
    from kafkactl.client.consumer import Consumer

    out: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
    with Consumer(bootstrap_servers=bootstrap) as c:
        tps = [(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)

        def done() -> bool:
            for pf in c.poll_fetches(0.2):
                out[pf.partition].extend((b.base_offset, b.record_count) for b in pf.batches()
                                         if b.base_offset >= pf.fetch_offset)
            return all(c.position(tp) >= end[tp] for tp in tps)

        wait_until(done, 60, f"reading the batches of {topic}")
    return out


def test_large_source_batches_are_copied_whole(broker_factory: Any, tmp_path: Path) -> None:
    from kafkactl.client.producer import Producer

    source, target = _clusters(broker_factory)
    create_topics(source.bootstrap, {"bulk": 2})
    # batches made by size (32 KiB), never by the clock: the layout is the same every run
    with Producer(source.bootstrap, linger_ms=600_000, batch_size=32 << 10) as p:
        for i in range(6000):
            p.send("bulk", f"v{i}".encode() * 5, f"k{i}".encode(), partition=i % 2,
                   headers=[("seq", str(i).encode())], timestamp_ms=1_600_000_000_000 + i)
        assert p.flush(60)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "bulk")
    wait_until(lambda: mirrored(m, 6000), 60, f"mirrored:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    assert_same(read_topic(source.bootstrap, "bulk"), read_topic(target.bootstrap, "bulk"))
    layout = _batch_layout(source.bootstrap, "bulk", 2)
    assert all(n >= 64 for batches in layout.values() for _, n in batches[:-1]), layout
    assert all(len(batches) > 1 for batches in layout.values()), layout
    assert _batch_layout(target.bootstrap, "bulk", 2) == layout  # batch for batch
