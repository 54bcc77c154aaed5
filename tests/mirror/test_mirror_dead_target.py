"""A mirror whose target dies (kill -9) says so as it happens, and SIGTERM then stops it
at once: what it could not deliver is not committed on the source, the exit says so in
those words (not "refused"), and the next run, the target back, copies it: the target ends
with every record once. (Before: silence until delivery.timeout.ms, and SIGTERM took the
30 s flush plus the 10 s close, to end with "the target refused the record".)"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.mirror.helpers import (
    FAST,
    assert_same,
    committed_offset,
    create_topics,
    produce,
    read_topic,
    start_mirror,
)
from tests.polling import wait_until

GROUP = "kafkactl-mirror"
DOWN = "warning: target: "


def _sigterm_with_the_target_dead(m: Any, source: Any, target: Any) -> str:
    """Kill the target, give the source 100 more records, wait for the mirror to say the
    target is down, SIGTERM it: it exits 1 at once (not after the 30 s flush and the 10 s
    close); its log."""
    target.kill()
    produce(source.bootstrap, "dt", 200, 100)
    port = target.bootstrap.rsplit(":", 1)[1]
    wait_until(lambda: DOWN in m.log() and port in m.log(), 60,
               f"the mirror saying the target is down:\n{m.log()}")
    started = time.monotonic()
    rc = m.terminate(timeout=120)
    took = time.monotonic() - started
    log: str = m.log()
    assert rc == 1, log
    assert took < 25, f"SIGTERM took {took:.1f} s (the 30 s flush was waited out)\n{log}"
    return log


def test_sigterm_with_a_dead_target_stops_at_once_and_loses_nothing(
        broker_factory: Any, tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"dt": 1})
    produce(source.bootstrap, "dt", 0, 200)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--topic", "dt", name="m1")
    m2 = None
    try:
        wait_until(lambda: committed_offset(source.bootstrap, GROUP, "dt") == 200, 60,
                   f"the first records copied:\n{m.log()}")
        log = _sigterm_with_the_target_dead(m, source, target)
        assert "stopped with 100 record(s) not delivered to the target" in log, log
        assert "the next run copies them" in log and "refused" not in log, log
        assert "Traceback" not in log, log
        assert committed_offset(source.bootstrap, GROUP, "dt") == 200
        target.start()
        m2 = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--topic", "dt",
                          name="m2")
        wait_until(lambda: committed_offset(source.bootstrap, GROUP, "dt") == 300, 60,
                   f"the next run copying the rest:\n{m2.log()}")
        assert m2.terminate() == 0, m2.log()
    finally:
        for mp in (m, m2):
            if mp is not None:
                mp.kill()
    assert_same(read_topic(source.bootstrap, "dt"), read_topic(target.bootstrap, "dt"))


def test_an_exactly_once_mirror_with_a_dead_target_stops_at_once(
        broker_factory: Any, tmp_path: Path) -> None:
    """--exactly-once: SIGTERM leaves the open transaction to the next run (neither commit
    nor abort can reach the target), says so, and the next run aborts it and copies its
    records: a read_committed reader of the target sees every record once."""
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"dt": 1})
    produce(source.bootstrap, "dt", 0, 200)
    eos = ("--topic", "dt", "--exactly-once", "--producer-property", "transactional.id=dt")
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, *eos, name="m1")
    m2 = None
    try:
        wait_until(lambda: committed_offset(target.bootstrap, GROUP, "dt") == 200, 60,
                   f"the first records copied:\n{m.log()}")
        log = _sigterm_with_the_target_dead(m, source, target)
        assert "not committed" in log and "the next run aborts an open transaction" in log, log
        assert "Traceback" not in log, log
        target.start()
        m2 = start_mirror(tmp_path, source.bootstrap, target.bootstrap, *eos, name="m2")
        wait_until(lambda: committed_offset(target.bootstrap, GROUP, "dt") == 300, 60,
                   f"the next run copying the rest:\n{m2.log()}")
        assert m2.terminate() == 0, m2.log()
    finally:
        for mp in (m, m2):
            if mp is not None:
                mp.kill()
    assert_same(read_topic(source.bootstrap, "dt"),
                read_topic(target.bootstrap, "dt", read_committed=True))
