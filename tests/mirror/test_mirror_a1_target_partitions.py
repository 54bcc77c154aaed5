"""The target's partition count is looked at again while the mirror runs (with the topic
refresh, not per record). A target the operator grew to its source's count, as the
mirror's warning said, gets records in their source partition again (they went by key into
the old partitions until a restart); a target topic deleted while the mirror ran (and
created again with one partition by the target's auto.create.topics.enable) stops the
mirror at once saying so (the records of the vanished partitions sat in the producer for
delivery.timeout.ms, then "the leader of del1-1 could not be reached", or it failed with
"partition 2 does not exist"); a restart into a target with fewer partitions warns that
records go by key. Real source and target brokers, real `kafkactl mirror` processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.admin import AdminClient
from kafkactl.mirror.topics import TargetTopics
from tests.mirror.helpers import (
    FAST,
    copied,
    count,
    create_topics,
    produce,
    read_topic,
    start_mirror,
)
from tests.polling import wait_until


def _grow(bootstrap: str, topic: str, partitions: int) -> None:
    with AdminClient(bootstrap) as admin:
        assert admin.create_partitions({topic: partitions}) == {topic: None}
        admin.client.ensure_topics([topic], allow_auto_create=False)


def test_target_grown_to_the_source_count_keeps_partitions_again(broker_factory: Any) -> None:
    source = AdminClient(broker_factory().bootstrap)
    target_broker = broker_factory()
    target = AdminClient(target_broker.bootstrap)
    try:
        topics = TargetTopics(target, source, lambda name: name, recheck_s=0.0)
        assert topics.get("grows", 2).keep_partition
        by_key = topics.get("grows", 4)
        assert (by_key.partitions, by_key.keep_partition) == (2, False)
        _grow(target_broker.bootstrap, "grows", 4)
        # the copy path's look (recheck=False) stays cached; the topic refresh's looks again
        assert topics.get("grows", 4, recheck=False) is by_key
        again = topics.get("grows", 4)
        assert (again.name, again.partitions, again.keep_partition) == ("grows", 4, True)
    finally:
        source.close()
        target.close()


def test_a_target_topic_that_lost_partitions_is_named(broker_factory: Any) -> None:
    from kafkactl.mirror.topics import TargetTopicChanged

    source = AdminClient(broker_factory().bootstrap)
    target_broker = broker_factory()
    target = AdminClient(target_broker.bootstrap)
    try:
        topics = TargetTopics(target, source, lambda name: name, recheck_s=0.0)
        assert topics.get("del", 3).partitions == 3
        assert target.delete_topics(["del"]) == {"del": None}
        wait_until(lambda: "del" not in target.list_topics(), 30, "the topic deleted")
        create_topics(target_broker.bootstrap, {"del": 1})  # as auto-create makes it
        with pytest.raises(TargetTopicChanged, match="has 1 partition.s. now, 3 before: it "
                                                     "was deleted and created again"):
            topics.get("del", 3)
    finally:
        source.close()
        target.close()


def test_running_mirror_follows_a_target_grown_by_the_operator(broker_factory: Any,
                                                               tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"grow": 2})
    create_topics(target.bootstrap, {"grow": 2})
    produce(source.bootstrap, "grow", 0, 100, partitions=2)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "grow")
    try:
        wait_until(lambda: copied(target.bootstrap, "grow", 100), 60, "the first 100 copied")
        _grow(source.bootstrap, "grow", 4)
        produce(source.bootstrap, "grow", 100, 100, partitions=4)
        wait_until(lambda: copied(target.bootstrap, "grow", 200) or m.proc.poll() is not None,
                   60, "the records of the new source partitions copied")
        assert "partitioned by key from now on" in m.log(), m.log()
        _grow(target.bootstrap, "grow", 4)  # what the warning says to do
        wait_until(lambda: "keep their source partition again" in m.log()
                   or m.proc.poll() is not None, 60, "the mirror to see the grown target")
        assert m.proc.poll() is None, m.log()
        produce(source.bootstrap, "grow", 200, 100, partitions=4)  # record i -> i % 4
        wait_until(lambda: copied(target.bootstrap, "grow", 300) or m.proc.poll() is not None,
                   60, "the last 100 copied")
        assert m.proc.poll() is None, m.log()
        moved = []
        for p, rows in read_topic(target.bootstrap, "grow").items():
            for _key, _value, headers, _ts in rows:
                seq = int(dict(headers)["seq"] or b"-1")
                if seq >= 200 and p != seq % 4:
                    moved.append((seq, p))
        assert not moved, f"records copied into another partition: {moved[:10]}"
    finally:
        m.kill()


def test_target_topic_deleted_while_mirroring_stops_the_mirror_saying_so(
        broker_factory: Any, tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"del1": 3})
    produce(source.bootstrap, "del1", 0, 300, partitions=3)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "del1")
    try:
        wait_until(lambda: copied(target.bootstrap, "del1", 300), 60, "the first 300 copied")
        with AdminClient(target.bootstrap) as admin:
            assert admin.delete_topics(["del1"]) == {"del1": None}
        produce(source.bootstrap, "del1", 300, 300, partitions=3)
        # well before delivery.timeout.ms (120 s) would end it
        rc = wait_until(lambda: m.proc.poll() is not None and [m.proc.poll()], 60,
                        "the mirror to stop")[0]
        assert rc == 1, m.log()
        assert "deleted" in m.log(), m.log()
        status = m.status()
        assert status is not None and "deleted" in (status["error"] or ""), status
    finally:
        m.kill()
    # whatever the target made of it meanwhile, a topic of 1 partition now
    with AdminClient(target.bootstrap) as admin:
        if "del1" not in admin.list_topics():
            create_topics(target.bootstrap, {"del1": 1})
    before = count(target.bootstrap, "del1")
    m2 = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "del1",
                      name="restarted")
    try:
        wait_until(lambda: "partitioned by key" in m2.log() or m2.proc.poll() is not None,
                   60, "the restarted mirror to warn")
        assert "has 3 partitions, its target del1 1" in m2.log(), m2.log()
        wait_until(lambda: copied(target.bootstrap, "del1", before + 1)
                   or m2.proc.poll() is not None, 60, "copying to resume")
        assert m2.proc.poll() is None, m2.log()
    finally:
        m2.kill()
