"""A follower fetching many partitions in one request moves each partition that got data
to the end of its next request (Kafka's fetcher threads: updateAndMoveToEnd), so a
partition whose batch does not fit what busy partitions before it leave of
replica.fetch.response.max.bytes is not starved: restarted behind partitions of 8 MB of
small batches each and one of a single 1 MB batch, the follower has the 1 MB batch long
before it has caught up with the others (in a fixed order it came last)."""

from __future__ import annotations

import os
from typing import Any

from tests.broker.wire import Wire, batch
from tests.cluster.cluster_helpers import start_cluster
from tests.cluster.test_config_changes import create_topic
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

SEG = "00000000000000000000.log"
SMALL, SMALL_BATCHES = 20_000, 400
BIG = 1_000_000


def test_a_partition_with_a_big_batch_is_not_starved_by_busy_ones(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, zookeeper, ids=(1, 2),
                            replica_fetch_max_bytes="50000",
                            replica_fetch_response_max_bytes="80000",
                            replica_fetch_backoff_ms="100")
    leader, follower = cluster.brokers[1], cluster.brokers[2]
    create_topic(cluster, "rot", {p: [1, 2] for p in range(3)},
                 {"max.message.bytes": "2000000"})
    assert follower.stop() == 0
    with Wire(leader.bootstrap, timeout=60) as w:
        for p in (0, 1):
            for _ in range(SMALL_BATCHES):
                assert w.produce("rot", batch([os.urandom(SMALL)]), partition=p,
                                 acks=1)["error_code"] == 0
        assert w.produce("rot", batch([os.urandom(BIG)]), partition=2,
                         acks=1)["error_code"] == 0
    size = {p: (leader.data_dir / f"rot-{p}" / SEG).stat().st_size for p in range(3)}

    def have(p: int) -> int:
        f = follower.data_dir / f"rot-{p}" / SEG
        return f.stat().st_size if f.exists() else 0

    follower.start()
    wait_until(lambda: all(have(p) == size[p] for p in range(3)), 60, "a caught-up follower")
    # when each partition's last bytes were written on the follower (its segment's mtime;
    # nothing is written after it caught up): the big batch came long before the small
    # partitions were done (in a fixed order it came only after them)
    done = {p: (follower.data_dir / f"rot-{p}" / SEG).stat().st_mtime_ns for p in range(3)}
    assert done[2] < min(done[0], done[1]), done
