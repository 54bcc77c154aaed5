"""A source topic that gains partitions while the mirror runs: its target keeps its
partition count, so the copy goes by key from then on (as a mirror started then would);
keeping source partition p -> p named a partition the target lacks and stopped the mirror
("partition 3 does not exist") at the next rebalance. Real source and target brokers."""

from __future__ import annotations

from typing import Any

from kafkactl.client.admin import AdminClient
from kafkactl.mirror.topics import TargetTopics


def test_a_grown_source_is_copied_by_key(broker_factory: Any) -> None:
    source = AdminClient(broker_factory().bootstrap)
    target = AdminClient(broker_factory().bootstrap)
    try:
        topics = TargetTopics(target, source, lambda name: name)
        first = topics.get("grows", 2)
        assert (first.name, first.partitions, first.keep_partition) == ("grows", 2, True)
        assert topics.get("grows", 2) is first  # cached while the count holds
        grown = topics.get("grows", 4)
        assert (grown.name, grown.partitions, grown.keep_partition) == ("grows", 2, False)
        assert topics.get("grows", 4) is grown
        assert len(target.list_topics()["grows"].partitions) == 2  # the target untouched
    finally:
        source.close()
        target.close()
