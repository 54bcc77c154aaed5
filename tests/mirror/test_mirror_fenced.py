"""A mirror whose source group member is fenced (FENCED_INSTANCE_ID: another process joined
with the same group.instance.id) stops, as `kafkactl consume -G` does: exit status 1 with
a sentence saying so and what to do, no retrying, nothing committed after the fence. The
member that took over goes on from the group's commits, so the target holds every record
once: the fenced mirror had committed all it copied (at-least-once: a restart re-copies at
most what it sent since its last commit), and with --exactly-once its open transaction is
aborted, not committed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkactl.client.errors import REJOIN_GROUP
from kafkactl.client.group.membership import fenced_error
from kafkactl.mirror.stream import is_fenced, is_transient
from kafkactl.protocol.errors import ErrorCode
from tests.mirror.helpers import (
    FAST,
    MirrorProcess,
    assert_same,
    committed_offset,
    copied,
    create_topics,
    produce,
    read_topic,
    start_mirror,
)
from tests.polling import wait_until

GROUP = "kafkactl-mirror"
STATIC = ["--topic", "fz", "--consumer-property", "group.instance.id=mirror-1",
          "--consumer-property", "session.timeout.ms=6000",
          "--consumer-property", "heartbeat.interval.ms=500"]
SAID = "another member with the same group.instance.id 'mirror-1' joined and took over"


def test_a_fence_is_not_transient() -> None:
    fenced = fenced_error(GROUP, "mirror-1")
    assert ErrorCode.FENCED_INSTANCE_ID not in REJOIN_GROUP
    assert is_fenced(fenced) and not is_transient(fenced)
    assert not is_fenced(KeyError())


def _committed(bootstrap: str) -> int:
    return committed_offset(bootstrap, GROUP, "fz")


def _fenced_exit(m: MirrorProcess) -> int:
    rc = m.proc.wait(60)
    log = m.log()
    assert SAID in log and "each instance of a group needs its own group.instance.id" in log, log
    assert "retrying" not in log and "Traceback" not in log, log
    return rc


def _stop(*mirrors: MirrorProcess | None) -> None:
    for m in mirrors:
        if m is not None and m.proc.poll() is None:
            m.kill()


def test_a_fenced_mirror_exits_and_the_new_member_goes_on(broker_factory: Any,
                                                          tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"fz": 1})
    produce(source.bootstrap, "fz", 0, 300)
    m1 = start_mirror(tmp_path, source.bootstrap, target.bootstrap, *STATIC, name="m1")
    m2 = None
    try:
        wait_until(lambda: _committed(source.bootstrap) == 300, 60,
                   f"m1 copying and committing the first records:\n{m1.log()}")
        m2 = start_mirror(tmp_path, source.bootstrap, target.bootstrap, *STATIC, name="m2")
        rc = _fenced_exit(m1)
        produce(source.bootstrap, "fz", 300, 300)
        wait_until(lambda: _committed(source.bootstrap) == 600, 60,
                   f"m2 copying and committing the next ones:\n{m2.log()}")
        assert m2.terminate() == 0, m2.log()
    finally:
        _stop(m1, m2)
    assert rc == 1
    # m1 had committed all it copied: no record twice
    assert_same(read_topic(source.bootstrap, "fz"), read_topic(target.bootstrap, "fz"))


def test_a_fenced_exactly_once_mirror_aborts_its_open_transaction(
        broker_factory: Any, tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"fz": 1})
    produce(source.bootstrap, "fz", 0, 300)
    # m1 commits at its first step, then copies what follows into a transaction it would
    # commit only much later
    m1 = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--exactly-once",
                      *STATIC, "--producer-property", "transactional.id=m1",
                      "--commit-interval-ms", "120000", name="m1")
    m2 = None
    try:
        wait_until(lambda: _committed(target.bootstrap) == 300, 60,
                   f"m1 copying and committing the first records:\n{m1.log()}")
        produce(source.bootstrap, "fz", 300, 300)
        wait_until(lambda: copied(target.bootstrap, "fz", 600), 60,
                   f"m1 copying the next ones into its open transaction:\n{m1.log()}")
        m2 = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--exactly-once",
                          *STATIC, "--producer-property", "transactional.id=m2", name="m2")
        rc = _fenced_exit(m1)
        wait_until(lambda: _committed(target.bootstrap) == 600, 60,
                   f"m2 copying and committing them:\n{m2.log()}")
        assert m2.terminate() == 0, m2.log()
    finally:
        _stop(m1, m2)
    assert rc == 1
    # m1's transaction aborted (committed, its records would be there twice; left open,
    # a read_committed reader would see nothing past 300)
    assert_same(read_topic(source.bootstrap, "fz"),
                read_topic(target.bootstrap, "fz", read_committed=True))


def test_streams_of_one_mirror_do_not_fence_each_other(broker_factory: Any,
                                                       tmp_path: Path) -> None:
    """--num-streams 2 with one group.instance.id: each stream joins as ID-0 / ID-1 (two
    static members, sharing the partitions) instead of the second fencing the first: both
    hold partitions, the mirror copies everything and SIGTERM ends it with 0."""
    from kafkactl.client.group import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient

    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"fz": 4})
    produce(source.bootstrap, "fz", 0, 400, partitions=4)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, *STATIC,
                     "--num-streams", "2", name="m")
    try:
        def two_static_members() -> bool:
            client = KafkaClient(source.bootstrap)
            try:
                desc = GroupAdmin(client).describe_group(GROUP)
            finally:
                client.close()
            return desc.state == "Stable" and sorted(
                m.group_instance_id for m in desc.members if m.assignment) == [
                "mirror-1-0", "mirror-1-1"]

        wait_until(two_static_members, 60, f"two members sharing fz:\n{m.log()}")
        wait_until(lambda: sum(committed_offset(source.bootstrap, GROUP, "fz", p)
                               for p in range(4)) == 400, 60,
                   f"everything committed:\n{m.log()}")
        assert SAID not in m.log(), m.log()
        assert m.terminate() == 0, m.log()
    finally:
        _stop(m)
    assert_same(read_topic(source.bootstrap, "fz"), read_topic(target.bootstrap, "fz"))
