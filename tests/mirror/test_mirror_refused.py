"""A record the target refuses for good (a target topic with a small max.message.bytes),
with and without --exactly-once, stopping at it (the default) or skipping it
(--no-abort-on-send-failure): what the target holds afterwards (read_committed with
--exactly-once), where the group's offsets are, and that a restart once the target takes
the record goes on from it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.admin import AdminClient
from kafkactl.client.group import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.producer import Producer
from tests.mirror.helpers import (
    FAST,
    Row,
    create_topics,
    produce,
    read_topic,
    start_mirror,
)
from tests.polling import wait_until

GROUP = "kafkactl-mirror"
BIG = 100  # the offset of the record the target refuses (of 201 in partition 0)


def _committed(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (-1: none) in that cluster."""
    client = KafkaClient(bootstrap)
    try:
        offsets = GroupAdmin(client).fetch_offsets(GROUP, [(topic, p)
                                                           for p in range(partitions)])
        return {p: off for (_t, p), off in offsets.items()}
    finally:
        client.close()


def _clusters(broker_factory: Any, max_message_bytes: str = "2000") -> tuple[Any, Any]:
    """A source whose `big` (2 partitions) has 201 records in partition 0, in one batch,
    the one at offset 100 of 5000 bytes; a target `big` taking at most
    `max_message_bytes` bytes per batch."""
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"big": 2})
    create_topics(target.bootstrap, {"big": 2}, {"max.message.bytes": max_message_bytes})
    with Producer(source.bootstrap, linger_ms=500, batch_size=1 << 20) as p:
        for i in range(201):
            value = b"y" * 5000 if i == BIG else f"v{i}".encode()
            p.send("big", value, f"k{i}".encode(), partition=0,
                   headers=[("seq", str(i).encode())], timestamp_ms=1_600_000_000_000 + i)
        assert p.flush(60)
    return source, target


def _take_big_records(target: str) -> None:
    with AdminClient(target) as admin:
        admin.alter_configs("big", {"max.message.bytes": "100000"})


def _refusal_named(log: str) -> bool:
    return (f"error: the target refused the record at offset {BIG} of big-0 (target topic "
            "big): MessageTooLargeError" in log)


def test_stops_at_a_refused_record_committing_the_offsets_before_it(
        broker_factory: Any, tmp_path: Path) -> None:
    source, target = _clusters(broker_factory)
    src = read_topic(source.bootstrap, "big")[0]
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "big")
    assert m.proc.wait(60) == 1, m.log()
    assert _refusal_named(m.log()), m.log()
    got = read_topic(target.bootstrap, "big")
    # the records after the refused one were in flight in the same target batch: the
    # target has them too (the producer split the batch down to the refused record)
    assert sorted(got[0]) == sorted(src[:BIG] + src[BIG + 1:])
    assert got[1] == []
    # committed up to the refused record: a restart resumes there
    assert _committed(source.bootstrap, "big", 2) == {0: BIG, 1: -1}
    _take_big_records(target.bootstrap)
    again = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "big",
                         name="again")
    wait_until(lambda: _committed(source.bootstrap, "big", 2)[0] == 201, 60,
               f"the restarted mirror to commit the end:\n{again.log()}")
    assert again.terminate() == 0, again.log()
    # nothing lost; the records before the refused one once, those after it twice
    got = read_topic(target.bootstrap, "big")
    assert Counter(got[0]) == Counter(src) + Counter(src[BIG + 1:])


def test_no_abort_skips_a_refused_record_and_commits_past_it(broker_factory: Any,
                                                            tmp_path: Path) -> None:
    source, target = _clusters(broker_factory)
    src = read_topic(source.bootstrap, "big")[0]
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "big",
                     "--no-abort-on-send-failure")
    wait_until(lambda: _committed(source.bootstrap, "big", 2)[0] == 201, 60,
               f"the mirror to commit past the refused record:\n{m.log()}")
    # the status file is written every so often: it comes to the committed counts
    wait_until(lambda: (s := m.status()) is not None and (s["mirrored"], s["skipped"]) ==
               (200, 1), 30, f"the status to show 200 mirrored, 1 skipped: {m.status()}")
    assert m.terminate() == 0, m.log()
    got = read_topic(target.bootstrap, "big")
    assert sorted(got[0]) == sorted(src[:BIG] + src[BIG + 1:])
    assert got[1] == []
    assert _committed(source.bootstrap, "big", 2) == {0: 201, 1: -1}


def test_exactly_once_stops_at_a_refused_record_after_committing_the_ones_before(
        broker_factory: Any, tmp_path: Path) -> None:
    source, target = _clusters(broker_factory)
    src = read_topic(source.bootstrap, "big")[0]
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "big",
                     "--exactly-once")
    assert m.proc.wait(60) == 1, m.log()
    log = m.log()
    assert _refusal_named(log), log
    status = m.status()
    assert status is not None and status["state"] == "failed" and status["mirrored"] == BIG
    assert f"offset {BIG} of big-0" in status["error"]
    assert read_topic(target.bootstrap, "big", read_committed=True) == {0: src[:BIG], 1: []}
    # the offsets committed with them, the group's in the target; the source's untouched
    assert _committed(target.bootstrap, "big", 2) == {0: BIG, 1: -1}
    assert _committed(source.bootstrap, "big", 2) == {0: -1, 1: -1}
    _take_big_records(target.bootstrap)
    again = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "big",
                         "--exactly-once", name="again")
    wait_until(lambda: _committed(target.bootstrap, "big", 2)[0] == 201, 60,
               f"the restarted mirror to commit the end:\n{again.log()}")
    assert again.terminate() == 0, again.log()
    assert read_topic(target.bootstrap, "big", read_committed=True) == {0: src, 1: []}


def test_exactly_once_no_abort_leaves_a_refused_record_out(broker_factory: Any,
                                                           tmp_path: Path) -> None:
    source, target = _clusters(broker_factory)
    src = read_topic(source.bootstrap, "big")[0]
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "big",
                     "--exactly-once", "--no-abort-on-send-failure")
    wait_until(lambda: _committed(target.bootstrap, "big", 2)[0] == 201, 60,
               f"the mirror to commit past the refused record:\n{m.log()}")
    wait_until(lambda: (m.status() or {}).get("skipped") == 1, 30, "the skip counted")
    assert m.terminate() == 0, m.log()
    status = m.status()
    assert status is not None and (status["mirrored"], status["skipped"]) == (200, 1)
    assert f"skipped offset {BIG} of big-0: MessageTooLargeError" in m.log()
    # every other record once, in order
    assert read_topic(target.bootstrap, "big", read_committed=True) == {
        0: src[:BIG] + src[BIG + 1:], 1: []}
    assert _committed(source.bootstrap, "big", 2) == {0: -1, 1: -1}


@pytest.mark.parametrize("abort", [True, False], ids=["abort", "no-abort"])
def test_exactly_once_records_partitioned_by_key_two_refused(
        broker_factory: Any, tmp_path: Path, abort: bool) -> None:
    """Records of 1 source partition spread by key over 2 target partitions (record by
    record, small source batches); records at offsets 5 and 12 are refused."""
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"keyed": 1})
    create_topics(target.bootstrap, {"keyed": 2}, {"max.message.bytes": "1000"})
    for start, n, size in ((0, 5, 0), (5, 1, 2000), (6, 6, 0), (12, 1, 2000), (13, 7, 0)):
        produce(source.bootstrap, "keyed", start, n, partitions=1, value_size=size)
    src = read_topic(source.bootstrap, "keyed")[0]
    flag = "--abort-on-send-failure" if abort else "--no-abort-on-send-failure"
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "keyed",
                     "--exactly-once", flag)

    def copied() -> list[Row]:
        got = read_topic(target.bootstrap, "keyed", read_committed=True)
        return got[0] + got[1]

    if abort:
        assert m.proc.wait(60) == 1, m.log()
        assert ("error: the target refused the record at offset 5 of keyed-0 (target topic "
                "keyed)") in m.log(), m.log()
        assert Counter(copied()) == Counter(src[:5])
        assert _committed(target.bootstrap, "keyed", 1) == {0: 5}
    else:
        wait_until(lambda: _committed(target.bootstrap, "keyed", 1)[0] == 20, 60,
                   f"the mirror to commit past the refused records:\n{m.log()}")
        wait_until(lambda: (m.status() or {}).get("skipped") == 2, 30, "the skips counted")
        assert m.terminate() == 0, m.log()
        assert Counter(copied()) == Counter(src[:5] + src[6:12] + src[13:])


def test_exactly_once_a_record_over_max_request_size_is_named(broker_factory: Any,
                                                               tmp_path: Path) -> None:
    """Refused by the producer itself, before sending: the transaction goes on, and is
    committed up to that record."""
    source, target = _clusters(broker_factory, max_message_bytes="1000000")
    src = read_topic(source.bootstrap, "big")[0]
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "big",
                     "--exactly-once", "--producer-property", "max.request.size=3000")
    assert m.proc.wait(60) == 1, m.log()
    assert (f"error: the target refused the record at offset {BIG} of big-0 (target topic "
            "big): a record of 5004 bytes is larger than max.request.size") in m.log(), m.log()
    assert "aborting" not in m.log()
    assert read_topic(target.bootstrap, "big", read_committed=True) == {0: src[:BIG], 1: []}
    assert _committed(target.bootstrap, "big", 2) == {0: BIG, 1: -1}


@pytest.mark.parametrize("abort", [True, False], ids=["abort", "no-abort"])
def test_exactly_once_a_topic_the_target_may_not_write(broker_factory: Any, tmp_path: Path,
                                                       abort: bool) -> None:
    """Write on the target topic denied by an ACL: AddPartitionsToTxn refuses it, before
    any record is sent; the first record is named (or each one skipped)."""
    from kafkactl.client.security_admin import AclEntry, create_acls

    source = broker_factory(**FAST)
    target = broker_factory(
        **FAST, authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
        allow_everyone_if_no_acl_found="true")
    create_topics(source.bootstrap, {"denied": 1})
    create_topics(target.bootstrap, {"denied": 1})
    client = KafkaClient(target.bootstrap)
    try:  # (topic 2, literal 3; all 2, write 4; deny 2, allow 3)
        create_acls(client, [AclEntry(2, "denied", 3, "User:*", "*", 2, 3),
                             AclEntry(2, "denied", 3, "User:*", "*", 4, 2)])
    finally:
        client.close()
    produce(source.bootstrap, "denied", 0, 5, partitions=1)
    flag = "--abort-on-send-failure" if abort else "--no-abort-on-send-failure"
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "denied",
                     "--exactly-once", flag)
    if abort:
        assert m.proc.wait(60) == 1, m.log()
        assert ("error: the target refused the record at offset 0 of denied-0 (target topic "
                "denied): TopicAuthorizationFailedError") in m.log(), m.log()
        assert _committed(target.bootstrap, "denied", 1) == {0: -1}
    else:
        wait_until(lambda: _committed(target.bootstrap, "denied", 1)[0] == 5, 60,
                   f"the mirror to commit past the refused records:\n{m.log()}")
        wait_until(lambda: (m.status() or {}).get("skipped") == 5, 30, "the skips counted")
        assert m.terminate() == 0, m.log()
    assert read_topic(target.bootstrap, "denied", read_committed=True) == {0: []}
