"""The leader's high watermark counts the maximal ISR (KIP-497, Kafka's Partition.maximalIsr):
a follower whose ISR join is with the controller holds the high watermark back from the
moment it is proposed, and a follower being dropped holds it back until the controller
answers. A real Partition over a real Log; the ISR changes go through the same calls the
IsrChanger makes (propose, then the controller's answer or its refusal)."""

from __future__ import annotations

from pathlib import Path

from kafkactl.broker.partition import Partition
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from tests.log.helpers import make_batch

LEADER, F2, F3 = 1, 2, 3


def _leader(tmp_path: Path) -> Partition:
    part = Partition("t", 0, Log(tmp_path / "t-0", LogConfig()))
    part.become_leader(LEADER, epoch=1, isr=[LEADER, F2], replicas=[LEADER, F2, F3],
                       partition_epoch=1, now_ms=0.0)
    return part


def _produce(part: Partition, records: int) -> None:
    part.log.append(make_batch(records), leader_epoch=part.leader_epoch)


def test_a_follower_whose_join_is_in_flight_holds_the_high_watermark(tmp_path: Path) -> None:
    part = _leader(tmp_path)
    _produce(part, 10)
    part.update_follower(F2, 10, part.log_end_offset, 1.0)
    part.update_follower(F3, 10, part.log_end_offset, 1.0)
    assert part.high_watermark == 10
    assert part.needs_expand_isr(F3) and not part.needs_expand_isr(F2)
    part.propose_isr([LEADER, F2, F3])  # what IsrChanger.submit does
    assert part.isr_change_pending

    _produce(part, 10)  # log end 20; F2 (in the ISR) catches up, F3 (joining) does not
    part.update_follower(F2, 20, part.log_end_offset, 2.0)
    assert part.high_watermark == 10, "the HW passed a follower whose join is in flight"
    part.update_follower(F3, 15, part.log_end_offset, 2.0)
    assert part.high_watermark == 15

    assert not part.set_isr([LEADER, F2, F3], 2)  # the controller's answer: still 15
    assert part.high_watermark == 15 and not part.isr_change_pending
    part.update_follower(F3, 20, part.log_end_offset, 3.0)
    assert part.high_watermark == 20


def test_a_leaving_follower_counts_until_the_controller_answers(tmp_path: Path) -> None:
    part = _leader(tmp_path)
    part.set_isr([LEADER, F2, F3], 2)
    _produce(part, 10)
    part.update_follower(F2, 10, part.log_end_offset, 1.0)
    part.update_follower(F3, 4, part.log_end_offset, 1.0)
    assert part.high_watermark == 4
    part.propose_isr([LEADER, F2])  # F3 lags: a shrink is proposed
    part.update_follower(F2, 10, part.log_end_offset, 2.0)
    assert part.high_watermark == 4, "the HW passed a follower still in the ISR"
    assert part.set_isr([LEADER, F2], 3)  # committed: F3 no longer counts
    assert part.high_watermark == 10


def test_a_refused_join_stops_counting(tmp_path: Path) -> None:
    part = _leader(tmp_path)
    _produce(part, 10)
    part.update_follower(F2, 10, part.log_end_offset, 1.0)
    part.update_follower(F3, 10, part.log_end_offset, 1.0)
    part.propose_isr([LEADER, F2, F3])
    _produce(part, 5)
    part.update_follower(F2, 15, part.log_end_offset, 2.0)
    assert part.high_watermark == 10
    part.isr_change_pending = False  # refused or lost (IsrChanger._apply / its retry path)
    assert part.maximal_isr == [LEADER, F2]
    assert part.maybe_advance_high_watermark()
    assert part.high_watermark == 15


def test_a_new_leader_term_forgets_the_proposal(tmp_path: Path) -> None:
    part = _leader(tmp_path)
    part.propose_isr([LEADER, F2, F3])
    part.become_leader(LEADER, epoch=2, isr=[LEADER, F2], replicas=[LEADER, F2, F3],
                       partition_epoch=5, now_ms=0.0)
    assert not part.isr_change_pending and part.maximal_isr == [LEADER, F2]
