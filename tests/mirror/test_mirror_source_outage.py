"""A mirror whose source cluster goes down and comes back: its topic lookups back off (as
Kafka's clients: 100 ms doubling to 1 s, with jitter) and are told once, then at most every
30 s with the number of attempts, not a line per retry; a line says when they succeed again,
and the records produced since are copied. The test waits for a number of failed attempts
(the status's source_lookup_failures counts them), never for a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.mirror.helpers import (
    FAST,
    MirrorProcess,
    assert_same,
    create_topics,
    mirrored,
    produce,
    read_topic,
    start_mirror,
)
from tests.polling import wait_until

ATTEMPTS = 8  # failed lookups waited for while the source is down
LOOKUP = "warning: looking up source topics: "


def _lookup_lines(m: MirrorProcess, start: int) -> list[str]:
    return [line for line in m.log()[start:].splitlines() if line.startswith(LOOKUP)]


def _failures(m: MirrorProcess) -> int:
    st = m.status() or {}
    return int(st.get("source_lookup_failures") or 0)


def test_a_source_outage_is_retried_with_backoff_and_told_without_a_line_per_retry(
        broker_factory: Any, tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"outage": 1})
    produce(source.bootstrap, "outage", 0, 10)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--whitelist", "outage")
    wait_until(lambda: mirrored(m, 10), 60, f"10 records mirrored:\n{m.log()}")
    start = len(m.log())
    source.stop()

    # ATTEMPTS failed lookups, as the status counts them (or, where nothing counts them,
    # as many lines said)
    wait_until(lambda: max(_failures(m), len(_lookup_lines(m, start))) >= ATTEMPTS, 120,
               f"{ATTEMPTS} failed lookups of the source topics:\n{m.log()}")
    said = _lookup_lines(m, start)
    # one line when the lookups started failing, then a reminder at most every 30 s (8
    # attempts backing off to 1 s take seconds): never a line per retry
    assert said, m.log()
    assert len(said) < ATTEMPTS // 2, f"{len(said)} lines for {_failures(m)} attempts:\n" + \
        "\n".join(said)
    assert said[0].startswith(f"{LOOKUP}no broker answered at {source.bootstrap}"), said
    assert said[0].endswith("; retrying"), said
    for line in said[1:]:
        assert "still failing after" in line, said
    st = m.status()
    assert st is not None and st["source_lookup_error"], st
    assert source.bootstrap in st["source_lookup_error"], st

    source.start()  # same port, same data
    back = wait_until(
        lambda: [line for line in _lookup_lines(m, start) if ": back after " in line], 60,
        f"a line saying the lookups succeed again:\n{m.log()}")
    assert len(back) == 1, m.log()
    failed = int(back[0].split(": back after ", 1)[1].split()[0])
    assert failed >= ATTEMPTS, back
    assert back[0].endswith(" s"), back  # "...: back after N failed attempts in T s"
    wait_until(lambda: _failures(m) == 0, 60, f"the status's failures reset:\n{m.log()}")

    produce(source.bootstrap, "outage", 10, 10)
    wait_until(lambda: mirrored(m, 20), 120, f"20 records mirrored:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    assert_same(read_topic(source.bootstrap, "outage"), read_topic(target.bootstrap, "outage"))
    # and the stream said its retries as sparingly (at most a line, a reminder, a back)
    streams = [line for line in m.log()[start:].splitlines()
               if line.startswith("warning: stream 0: ") and "retrying" in line]
    assert len(streams) < ATTEMPTS // 2, m.log()
