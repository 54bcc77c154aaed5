"""`kafkactl mirror --exactly-once` between two real single-broker clusters: the mirror is
SIGKILLed several times mid-copy while the source keeps growing, and restarted; a
read_committed reader of the target then finds every source record exactly once, in
order, per partition (the consumed offsets are committed in the producer's transaction,
KIP-447, so a killed mirror's open transaction is aborted and read again)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from kafkactl.client.group import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from tests.mirror.helpers import (
    FAST,
    assert_same,
    count,
    create_topics,
    produce,
    read_topic,
    start_mirror,
)
from tests.polling import wait_until

TOPICS = {"eos.orders": 3, "eos.audit": 1}
GROUP = "kafkactl-mirror"


def _copied(target: str, m: Any, at_least: int) -> bool:
    assert m.proc.poll() is None, m.log()
    try:
        return sum(count(target, t) for t in TOPICS) >= at_least
    except Exception:
        return False


def _committed_total(bootstrap: str, topic: str, partitions: int) -> int:
    client = KafkaClient(bootstrap)
    try:
        offsets = GroupAdmin(client).fetch_offsets(GROUP, [(topic, p)
                                                           for p in range(partitions)])
        return sum(max(0, o) for o in offsets.values())
    finally:
        client.close()


def test_sigkilled_three_times_mid_copy_target_holds_each_record_once(
        broker_factory: Any, tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, TOPICS)
    for topic, n in TOPICS.items():  # enough that every kill lands mid-copy
        produce(source.bootstrap, topic, 100_000, 4000, partitions=n)
    done = threading.Event()

    def keep_producing() -> None:
        # until the kills are over, so that each run finds more to copy: a run that caught
        # up before its kill (a fast mirror) left the next nothing, and the test waited on
        # a copy that could not come
        i = 0
        while not done.is_set():
            for topic, n in TOPICS.items():
                produce(source.bootstrap, topic, 200_000 + i * 200, 200, partitions=n)
            i += 1
            done.wait(0.2)

    producer = threading.Thread(target=keep_producing)
    producer.start()
    try:
        for run in range(3):
            m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--exactly-once",
                             "--whitelist", r"eos\..*", name=f"eos-{run}")
            before = sum(count(target.bootstrap, t) for t in TOPICS) if run else 0
            wait_until(lambda m=m, before=before: _copied(target.bootstrap, m, before + 1500),
                       120, f"the mirror to copy more:\n{m.log()}")
            m.kill()  # SIGKILL mid-copy: an open transaction is left behind
    finally:
        done.set()
        producer.join()
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--exactly-once",
                     "--whitelist", r"eos\..*", name="eos-final")
    # running (its SIGTERM handler installed) before anything is asked of it
    wait_until(lambda: (m.status() or {}).get("state") == "running", 60,
               f"the last mirror to start:\n{m.log()}")
    expected = {t: count(source.bootstrap, t) for t in TOPICS}
    # the offsets are committed in the target's transactions: the group's offsets there
    wait_until(lambda: all(_committed_total(target.bootstrap, t, n) == expected[t]
                           for t, n in TOPICS.items()), 180,
               f"the last mirror to commit the end of every partition:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    for topic in TOPICS:
        src = read_topic(source.bootstrap, topic)
        assert_same(src, read_topic(target.bootstrap, topic, read_committed=True))
    # the killed runs' aborted records are in the target's log, invisible to read_committed
    assert sum(count(target.bootstrap, t) for t in TOPICS) > sum(expected.values())


def test_exactly_once_refuses_a_transactional_id_without_it(tmp_path: Path) -> None:
    from tests.mirror.helpers import run_mirror

    r = run_mirror("--source", "127.0.0.1:1", "--target", "127.0.0.1:1", "--topic", "t",
                   "--producer-property", "transactional.id=x")
    assert r.returncode == 2
    assert "transactional.id goes with --exactly-once" in r.stderr


def test_a_renamed_topic_is_copied_once_and_its_offsets_kept_under_its_new_name(
        broker_factory: Any, tmp_path: Path) -> None:
    """--rename with --exactly-once: the offsets are kept under the target topic's name
    (the source's is not in the target cluster: every TxnOffsetCommit was refused
    UNKNOWN_TOPIC_OR_PARTITION, nothing ever committed and read_committed saw nothing).
    SIGKILLed once mid-copy, restarted: each record once."""
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"ren.src": 2})
    produce(source.bootstrap, "ren.src", 0, 20_000, partitions=2)
    args = ("--exactly-once", "--topic", "ren.src", "--rename", "ren.src:ren.dst")
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, *args, name="ren-0")
    wait_until(lambda: _committed_total(target.bootstrap, "ren.dst", 2) > 0, 120,
               f"a first commit under the new name:\n{m.log()}")
    m.kill()
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, *args, name="ren-1")
    wait_until(lambda: (m.status() or {}).get("state") == "running", 60,
               f"the second mirror to start:\n{m.log()}")
    wait_until(lambda: _committed_total(target.bootstrap, "ren.dst", 2) == 20_000, 120,
               f"the mirror to commit the end of both partitions:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    assert "UNKNOWN_TOPIC_OR_PARTITION" not in m.log()
    assert_same(read_topic(source.bootstrap, "ren.src"),
                read_topic(target.bootstrap, "ren.dst", read_committed=True))


def test_a_target_topic_with_fewer_partitions_stops_the_mirror_naming_it(
        broker_factory: Any, tmp_path: Path) -> None:
    """A source partition whose number the target topic lacks has nowhere to keep its
    offset: the mirror stops as the partition is assigned, saying so (it retried and
    aborted for ever, committing nothing, its status 'running'; then stopped only once a
    record came to such a partition). Here only partition 0 has records."""
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"few": 3})
    create_topics(target.bootstrap, {"few": 1})
    produce(source.bootstrap, "few", 0, 300, partitions=1)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--exactly-once",
                     "--topic", "few", name="few")
    assert m.proc.wait(120) != 0, m.log()
    assert ("--exactly-once keeps the offset of source partition few-1 under partition 1 "
            "of the target topic few, which has 1 partition(s): add partitions to it "
            "(kafkactl topics alter -t few --partitions 3)") in m.log(), m.log()
    assert (m.status() or {}).get("state") == "failed", m.status()
