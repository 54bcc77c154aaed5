"""A group consumer whose generation is lost while a fetch is on its way (the heartbeat
thread heard ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID, e.g. just after the process was
resumed from SIGSTOP) hands out none of that fetch's records: they may be another member's
by now. After rejoining it reads from the group's committed offset, each record once.

The heartbeat thread's answer is put exactly between the fetch and the hand-out (the
base Consumer's poll_fetches wrapped), so the test does not depend on which thread of a
resumed process runs first; that race made a rejoined member print records twice."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kafkactl.client.consumer import Consumer
from kafkactl.client.group import GroupConsumer
from kafkactl.protocol.api_keys import ApiKey
from tests.groups.helpers import FAST, create_topic, produce, wait_until

TP = ("lg", 0)


def _drain(member: GroupConsumer, until: int, into: list[int]) -> None:
    def step() -> bool:
        for records in member.poll(200).values():
            into.extend(r.offset for r in records)
        return bool(into) and into[-1] >= until

    wait_until(step, 60, f"the member reading up to offset {until}")


def test_records_fetched_across_a_lost_generation_are_not_handed_out(
        broker_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = broker_factory(**FAST)
    b = broker.bootstrap
    create_topic(b, "lg", 1)
    produce(b, "lg", [str(i) for i in range(10)])
    member = GroupConsumer("lg", group_id="g-lg", bootstrap_servers=b,
                           enable_auto_commit=False, auto_offset_reset="earliest")
    lost: list[set[tuple[str, int]]] = []
    member.on_lost = lambda tps: lost.append(set(tps))
    try:
        first: list[int] = []
        _drain(member, 9, first)
        assert first == list(range(10))
        member.commit()
        assert member.committed([TP]) == {TP: 10}
        generation = member.coordinator.generation

        armed = [True]
        original = Consumer.poll_fetches

        def fetch_then_lose(self: Consumer, timeout: float = 1.0) -> Any:
            out = original(self, timeout)
            if out and armed[0] and self is member:
                armed[0] = False  # the heartbeat thread's answer, between fetch and hand-out
                member.coordinator._reset_generation(
                    "Heartbeat answered ILLEGAL_GENERATION (injected)", member_id=False)
            return out

        monkeypatch.setattr(Consumer, "poll_fetches", fetch_then_lose)
        produce(b, "lg", [str(i) for i in range(10, 20)])
        handed: list[int] = []
        while armed[0]:  # until a fetch brought records and the generation was lost
            for records in member.poll(200).values():
                handed.extend(r.offset for r in records)
        assert handed == [], "records fetched in a lost generation were handed out"
        _drain(member, 19, handed)
        assert handed == list(range(10, 20))  # from the commit, each once
        assert lost == [{TP}]
        assert member.coordinator.generation > generation
    finally:
        member.close()


def test_a_heartbeat_answer_read_late_is_no_news_of_the_present(
        broker_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Heartbeat answered NONE whose answer is read only after longer than the session
    (the process was stopped in between) does not count as having heard from the
    coordinator since: the member was expelled meanwhile, and a fetch read with it must
    ask the coordinator before handing anything out."""
    broker = broker_factory(group_min_session_timeout_ms="1000", **FAST)
    b = broker.bootstrap
    create_topic(b, "lh", 1)
    member = GroupConsumer("lh", group_id="g-lh", bootstrap_servers=b, session_timeout_ms=1500,
                           heartbeat_interval_ms=500, enable_auto_commit=False)
    try:
        wait_until(lambda: bool(member.assignment()), 60, "the member's assignment")
        coordinator = member.coordinator
        original = coordinator._request

        def answer_read_late(api_key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
            resp = original(api_key, body)
            if api_key == ApiKey.HEARTBEAT:
                time.sleep(2.5)  # stopped (SIGSTOP) after the answer came, before reading it
            return resp

        monkeypatch.setattr(coordinator, "_request", answer_read_late)
        with coordinator._lock:  # the heartbeat thread waits, as it would when stopped
            assert coordinator._heartbeat() == 0
            assert coordinator.session_lapsed()
            monkeypatch.setattr(coordinator, "_request", original)
            assert not coordinator.check_membership()  # expelled meanwhile
    finally:
        member.close()
