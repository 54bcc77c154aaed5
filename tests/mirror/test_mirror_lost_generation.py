"""`kafkactl mirror --exactly-once`: a stream expelled from the source group (its process
stopped beyond the session timeout) while its transaction is open must not commit that
transaction when it runs again: another mirror has copied and committed the same records
meanwhile. Its transactional.id differs from the new owner's, so only the group's
generation can fence it (KIP-447's check, which the target's coordinator cannot do for a
group of the source cluster): the stream aborts, and a read_committed reader of the target
finds every source record exactly once."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from kafkactl.client.group import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from tests.mirror.helpers import (
    FAST,
    assert_same,
    count,
    create_topics,
    produce,
    read_topic,
    start_mirror,
)
from tests.polling import wait_until

GROUP = "kafkactl-mirror"
COMMON = ["--exactly-once", "--whitelist", "lg", "--consumer-property",
          "session.timeout.ms=6000", "--consumer-property", "heartbeat.interval.ms=1000"]


def _target_committed(bootstrap: str) -> int:
    client = KafkaClient(bootstrap)
    try:
        return GroupAdmin(client).fetch_offsets(GROUP, [("lg", 0)])[("lg", 0)]
    finally:
        client.close()


def _copied(bootstrap: str, at_least: int) -> bool:
    try:
        return count(bootstrap, "lg") >= at_least
    except Exception:  # the mirror has not made the target topic yet
        return False


def _source_members(bootstrap: str) -> int:
    client = KafkaClient(bootstrap)
    try:
        desc = GroupAdmin(client).describe_group(GROUP)
    finally:
        client.close()
    return len(desc.members) if desc.state == "Stable" else 0


def test_an_expelled_exactly_once_stream_aborts_its_open_transaction(
        broker_factory: Any, tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"lg": 1})
    produce(source.bootstrap, "lg", 0, 500)
    # m1 commits at its first step, then copies what follows into a transaction it
    # would commit only much later
    m1 = start_mirror(tmp_path, source.bootstrap, target.bootstrap, *COMMON,
                      "--producer-property", "transactional.id=m1",
                      "--commit-interval-ms", "120000", name="m1")
    m2 = None
    try:
        wait_until(lambda: _target_committed(target.bootstrap) == 500, 60,
                   f"m1 copying and committing the first records:\n{m1.log()}")
        produce(source.bootstrap, "lg", 500, 500)
        wait_until(lambda: _copied(target.bootstrap, 1000), 60,
                   f"m1 copying the next ones into its open transaction:\n{m1.log()}")
        assert _target_committed(target.bootstrap) == 500
        m1.proc.send_signal(signal.SIGSTOP)
        try:
            m2 = start_mirror(tmp_path, source.bootstrap, target.bootstrap, *COMMON,
                              "--producer-property", "transactional.id=m2", name="m2")
            # the group expels the stopped m1; m2 copies everything and commits it
            wait_until(lambda: _target_committed(target.bootstrap) == 1000, 90,
                       f"m2 taking over and committing:\n{m2.log()}")
        finally:
            m1.proc.send_signal(signal.SIGCONT)
        # m1 runs again: before it is back in the group it has aborted (it committed,
        # before: 500-999 twice in the target)
        wait_until(lambda: _source_members(source.bootstrap) == 2, 60,
                   f"m1 back in the group:\n{m1.log()}")
    finally:
        codes = [m.terminate() for m in (m1, m2) if m is not None]
    logs = m1.log() + (m2.log() if m2 is not None else "")
    assert codes == [0, 0], logs
    assert "Traceback" not in logs, logs
    src = read_topic(source.bootstrap, "lg")
    assert_same(src, read_topic(target.bootstrap, "lg", read_committed=True))
