"""`kafkactl consume` of many partitions moves a partition that got records to the end of
its next fetch (as Java's consumer does), so partitions full of small records early in the
request do not hold back one whose big batch does not fit what they leave of
fetch.max.bytes (the broker answers it empty): the big record comes within the first
fetches, not after every small one."""

from __future__ import annotations

import os

from tests import zygote
from tests.broker.wire import Wire, batch
from tests.conftest import BrokerProcess

SMALL, SMALL_BATCHES = 2_000, 400
BIG = 300_000


def test_a_partition_with_a_big_batch_comes_early(broker: BrokerProcess) -> None:
    with Wire(broker.bootstrap, timeout=60) as w:
        assert w.create_topic("rot", partitions=3,
                              configs={"max.message.bytes": "2000000"})["error_code"] == 0
        for p in (0, 1):
            for _ in range(SMALL_BATCHES):
                assert w.produce("rot", batch([os.urandom(SMALL)]),
                                 partition=p)["error_code"] == 0
        assert w.produce("rot", batch([os.urandom(BIG)]), partition=2)["error_code"] == 0
    r = zygote.run(["consume", "-b", broker.bootstrap, "-t", "rot", "-e", "-o", "earliest",
                    "-f", "%p\n",
                    "-X", "fetch.max.bytes=20000", "-X", "max.partition.fetch.bytes=12000"],
                   text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    order = r.stdout.split()
    assert sorted(order) == ["0"] * SMALL_BATCHES + ["1"] * SMALL_BATCHES + ["2"]
    # a fetch takes at most ~20 small records: the big one comes within a few fetches
    assert order.index("2") < 100, order.index("2")
