"""A partition deleted and made again in one broker run does not take the deleted log's
high watermark, read from replication-offset-checkpoint at start-up, when it is hosted
again: a replica re-hosted after a StopReplica without deletion starts from the high
watermark checkpointed at start-up, which for a re-created topic was the old log's and
could stand above what the new log's ISR has (records shown as committed too early)."""

from __future__ import annotations

from pathlib import Path

from kafkactl.broker.partition_store import (
    HIGH_WATERMARK_CHECKPOINT,
    PartitionStore,
    TopicLogConfigs,
)
from kafkactl.broker.purgatory import FetchPurgatory
from kafkactl.log.checkpoint import write_checkpoint
from kafkactl.log.config import LogConfig
from kafkactl.log.manager import LogManager
from kafkactl.record.builder import RecordBatchBuilder

LEADER, LOCAL = 1, 2


def _batch(records: int) -> memoryview:
    b = RecordBatchBuilder(base_offset=0, partition_leader_epoch=1)
    for i in range(records):
        b.append(0, None, b"v%d" % i)
    return memoryview(b.build())


def test_a_recreated_partition_rehosted_keeps_its_own_high_watermark(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    config = LogConfig()
    # the first life of t-0: 10 records, all committed, checkpointed before this start
    first = LogManager([data], config)
    first.create_log("t", 0, config).append(_batch(10), leader_epoch=0)
    first.shutdown()
    write_checkpoint(data / HIGH_WATERMARK_CHECKPOINT, {("t", 0): 10})

    manager = LogManager([data], config)
    store = PartitionStore(manager, TopicLogConfigs(config), FetchPurgatory())
    assert store.checkpointed_high_watermarks == {("t", 0): 10}
    store.make_partition("t", 0, config)
    store.remove_partition("t", 0)  # the topic is deleted ...
    part = store.make_partition("t", 0, config)  # ... and made again: a new, empty log
    part.become_leader(LOCAL, 1, [LOCAL, LEADER], [LOCAL, LEADER], 1, 0.0)
    part.log.append(_batch(20), leader_epoch=1)
    part.update_follower(LEADER, 5, part.log_end_offset, 1.0)
    assert part.high_watermark == 5
    # a StopReplica without deletion, then hosted again as a follower
    store.stop_hosting("t", [0])
    again = store.make_partition("t", 0, config, leader_epoch=2, is_new=False)
    again.become_follower(LOCAL, LEADER, 2, [LEADER, LOCAL], [LEADER, LOCAL], 2)
    assert again.high_watermark <= 5  # never the deleted log's 10
    manager.shutdown()
