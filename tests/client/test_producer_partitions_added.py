"""A producer uses partitions added to its topic after it started: its metadata is
refreshed every metadata.max.age.ms (it was only on errors) and each send partitions by the
current count (it kept the count of its first send for ever), as Java's producer does. So
a long-running `tail -f | kafkactl produce -K` reaches new partitions. A real broker."""

from __future__ import annotations

from typing import Any

from kafkactl.client.admin import AdminClient
from kafkactl.client.partitioner import murmur2_partition
from kafkactl.client.producer import Producer
from tests.polling import wait_until


def test_a_grown_topic_gets_keyed_and_unkeyed_records_in_its_new_partitions(
        broker: Any) -> None:
    with AdminClient(broker.bootstrap) as admin:
        assert admin.create_topics({"grows": (2, 1, {})}) == {"grows": None}
    keys = [b"k%d" % i for i in range(200)]
    late = [k for k in keys if murmur2_partition(k, 4) >= 2][:20]
    with Producer(broker.bootstrap, metadata_max_age_ms=300, linger_ms=1) as p:
        first = [p.send("grows", b"v", key=k) for k in keys[:20]]
        assert p.flush(30)
        assert {f.result(10).partition for f in first} <= {0, 1}
        with AdminClient(broker.bootstrap) as admin:
            assert admin.create_partitions({"grows": 4}) == {"grows": None}

        def sees_four() -> bool:
            p.send("grows", b"tick")  # (a producer in use: its sender runs)
            return len(p.client.cluster.partitions_for("grows") or ()) == 4
        wait_until(sees_four, 30, "the producer's metadata showing 4 partitions")
        grown = [p.send("grows", b"v", key=k) for k in late]
        assert p.flush(30)
        assert [f.result(10).partition for f in grown] == [murmur2_partition(k, 4)
                                                         for k in late]
