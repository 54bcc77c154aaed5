"""ExponentialBackoff as Kafka's (KIP-580) and RetryNotices' lines, on a fake clock: the
first failure said, reminders at most every 30 s with the count, a line when it is over."""

from __future__ import annotations

import pytest

from kafkactl.mirror.retry import (
    MIN_GAP_S,
    REMIND_S,
    ExponentialBackoff,
    RetryNotices,
)


def test_backoff_doubles_from_the_initial_wait_up_to_the_cap() -> None:
    b = ExponentialBackoff(0.1, 1.0, jitter=0.0)
    assert [round(b.backoff(n), 3) for n in range(7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]


@pytest.mark.parametrize(("draw", "factor"), [(0.0, 0.8), (0.5, 1.0), (0.999999, 1.2)])
def test_backoff_jitter_is_20_percent_either_way_and_never_past_the_cap(
        draw: float, factor: float) -> None:
    b = ExponentialBackoff(0.1, 1.0, rng=lambda: draw)
    assert b.backoff(0) == pytest.approx(0.1 * factor, rel=1e-5)
    assert b.backoff(2) == pytest.approx(0.4 * factor, rel=1e-5)
    assert b.backoff(10) == pytest.approx(min(1.0, factor), rel=1e-5)


def test_an_initial_wait_above_the_cap_is_the_cap() -> None:
    assert ExponentialBackoff(5.0, 1.0).backoff(3) == 1.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_run_of_failures_is_said_once_then_reminded_with_its_count() -> None:
    clock, said = Clock(), []
    n = RetryNotices("looking up source topics", ExponentialBackoff(0.1, jitter=0.0),
                     say=said.append, clock=clock)
    waits = []
    for _ in range(40):  # one a second: 40 attempts in 39 s
        waits.append(n.failed(ConnectionError("no broker answered")))
        clock.now += 1.0
    assert waits[:6] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert said == ["looking up source topics: no broker answered; retrying",
                    f"looking up source topics: still failing after 31 attempts in "
                    f"{REMIND_S:.0f} s (no broker answered); retrying"]
    assert n.attempts == 40 and n.last_error == "no broker answered"
    n.succeeded()
    assert said[-1] == "looking up source topics: back after 40 failed attempts in 40 s"
    assert n.attempts == 0 and n.last_error is None
    n.succeeded()  # nothing more to say
    assert len(said) == 3


def test_one_failure_alone_says_no_back_line_and_failures_that_come_and_go_are_not_a_flood(
        ) -> None:
    clock, said = Clock(), []
    n = RetryNotices("stream 0", ExponentialBackoff(0.1), say=said.append, clock=clock)
    n.failed(OSError("reset"))
    n.succeeded()
    assert said == ["stream 0: reset; retrying"]
    for _ in range(20):  # a failure every half second, each followed by a success
        clock.now += 0.5
        assert n.failed(OSError("reset")) <= 0.12  # each a new run: the first wait
        n.succeeded()
    # one new line once MIN_GAP_S passed since the last, not one each time
    assert said == ["stream 0: reset; retrying"] * (1 + int(20 * 0.5 // MIN_GAP_S))
