"""A follower that fetches a cleaned log holding an empty batch (the cleaner's RETAIN_EMPTY:
an active producer's last batch with no record left) keeps the producer's last sequence
from the batch's last offset delta (Kafka's lastSequence), not its record count (0): once
leader, the producer's retry of its last batch is a duplicate (the cluster half of the
tester's c17: a follower whose disk was replaced)."""

from __future__ import annotations

import time
from pathlib import Path

from kafkactl.broker.partition import Partition
from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from tests.log.helpers import FakeTime
from tests.log.test_cleaner_active_producers import _config, overwrite_and_roll, produce


def test_a_follower_keeps_the_sequence_of_an_empty_batch(tmp_path: Path) -> None:
    leader = Partition("c", 0, Log(tmp_path / "l" / "c-0", _config()))
    last = produce(leader, [(b"X", b"x"), (b"Y", b"y")], pid=7, seq=0)
    overwrite_and_roll(leader, [b"X", b"Y"])
    LogCleaner(time=FakeTime(int(time.time() * 1000))).clean(leader.log, force=True)
    follower = Partition("c", 0, Log(tmp_path / "f" / "c-0", LogConfig()))
    follower.is_leader = False
    while follower.log_end_offset < leader.log_end_offset:
        fs = leader.log.read(follower.log_end_offset, 1 << 20, min_one_batch=True)
        follower.append_as_follower(memoryview(bytearray(fs.read_bytes())),
                                    leader.log_end_offset)
    entry = follower.producer_state.producers[7]
    assert entry.last_seq == 1
    dup = follower.producer_state.check(7, 0, 0, 1)
    assert dup is not None and (dup.first_offset, dup.last_offset) == (last, last + 1)
