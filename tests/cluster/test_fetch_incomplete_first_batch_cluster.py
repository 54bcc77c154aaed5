"""In a cluster: a leader's Fetch v3+ gives a later partition whose first batch does not fit
an empty record set (Kafka's firstEntryIncomplete), never a fragment. Its follower, which
fetches the 3 partitions in one request with replica.fetch.max.bytes=1 MiB, still copies
every 3 MB batch byte for byte, and aiokafka's default consumer reads all of them."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

from tests.broker.wire import Wire, batch
from tests.cluster.cluster_helpers import start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

RECORD = 3_000_000
PARTITIONS = 3


def test_followers_and_consumers_get_every_big_batch(broker_factory: Any,
                                                     zookeeper: ZooKeeperServer) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    cluster = start_cluster(broker_factory, zookeeper, ids=(1, 2),
                            replica_fetch_backoff_ms="100")
    r = subprocess.run([sys.executable, "-m", "kafkactl", "topics", "create", "-t", "mp",
                        "--replica-assignment", "1:2,1:2,1:2", "--config",
                        "max.message.bytes=20000000", "-b", cluster.bootstrap],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders("mp", PARTITIONS, expect=lambda ls: all(
        lead == 1 for lead in ls.values()))
    leader, follower = cluster.brokers[1], cluster.brokers[2]
    values = [os.urandom(RECORD) for _ in range(PARTITIONS)]
    with Wire(leader.bootstrap, timeout=60) as w:
        for p, v in enumerate(values):  # acks=1: the follower may fetch all 3 at once
            resp = w.produce("mp", batch([v]), partition=p, acks=1)
            assert resp["error_code"] == 0, resp
    seg = "00000000000000000000.log"

    def copied() -> bool:
        return all((follower.data_dir / f"mp-{p}" / seg).exists() and
                   (follower.data_dir / f"mp-{p}" / seg).read_bytes() ==
                   (leader.data_dir / f"mp-{p}" / seg).read_bytes() and
                   (leader.data_dir / f"mp-{p}" / seg).stat().st_size == RECORD + 74
                   for p in range(PARTITIONS))

    wait_until(copied, 60, "every 3 MB batch on the follower, byte for byte")

    async def consume() -> dict[int, list[bytes]]:
        c = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
        await c.start()
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        try:
            c.assign([TopicPartition("mp", p) for p in range(PARTITIONS)])
            deadline = time.monotonic() + 60
            while sum(map(len, got.values())) < PARTITIONS and time.monotonic() < deadline:
                for tp, msgs in (await c.getmany(timeout_ms=1000)).items():
                    got[tp.partition].extend(m.value for m in msgs)
        finally:
            await c.stop()
        return got

    assert asyncio.run(consume()) == {p: [v] for p, v in enumerate(values)}
