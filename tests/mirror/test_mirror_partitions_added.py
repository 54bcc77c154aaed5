"""Partitions added to a source topic while the mirror runs are copied: the mirror's
streams rejoin their group when a topic's partition count changes, so the new partitions
get assigned (they were never copied: the group's assignment did not change until another
rebalance, which then stopped the mirror naming a partition the target lacks), and their
records go to the target by key (it keeps its partition count). Real brokers, a real
`kafkactl mirror` process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkactl.client.admin import AdminClient
from tests.mirror.helpers import copied, create_topics, produce, start_mirror
from tests.polling import wait_until


def test_partitions_added_to_a_source_topic_are_copied(broker_factory: Any,
                                                       tmp_path: Path) -> None:
    source, target = broker_factory(), broker_factory()
    create_topics(source.bootstrap, {"grow": 2})
    produce(source.bootstrap, "grow", 0, 100, partitions=2)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "grow")
    try:
        wait_until(lambda: copied(target.bootstrap, "grow", 100), 60, "the first 100 copied")
        with AdminClient(source.bootstrap) as admin:
            assert admin.create_partitions({"grow": 4}) == {"grow": None}
            admin.client.ensure_topics(["grow"], allow_auto_create=False)
        produce(source.bootstrap, "grow", 100, 100, partitions=4)  # 50 in partitions 2, 3
        wait_until(lambda: copied(target.bootstrap, "grow", 200) or m.proc.poll() is not None,
                   60, "the records of the new partitions copied")
        assert m.proc.poll() is None, m.log()
        assert copied(target.bootstrap, "grow", 200), m.log()
        assert "partitioned by key from now on" in m.log(), m.log()
    finally:
        m.kill()
