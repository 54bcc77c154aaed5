"""Committed offsets of a deleted topic (Kafka's GroupCoordinator.onPartitionsDeleted): they
leave every group when the topic is deleted, with tombstones in __consumer_offsets (so a
restart does not bring them back), a group left with nothing becomes Dead, and a topic
created again under the name starts with no offsets. Offsets that outlived their topic (a
data dir written before this) are shown, skipped by `offsets reset` and removed by
`offsets delete --topic`."""

from __future__ import annotations

import json
import shutil
from typing import Any

from tests.conftest import BrokerProcess
from tests.groups.helpers import FAST, create_topic, kafkactl, produce, wait_until


def _show(b: BrokerProcess, *args: str) -> Any:
    return kafkactl("offsets", "show", *args, "-b", b.bootstrap)


def _rows(b: BrokerProcess, group: str) -> dict[tuple[str, int], dict[str, Any]]:
    r = _show(b, "-G", group, "--json")
    assert r.returncode == 0, r.stderr
    return {(row["topic"], row["partition"]): row for row in json.loads(r.stdout)}


def _commit(b: BrokerProcess, group: str, *topics: str) -> None:
    """Commit each partition's end offset for `group` (a group that only stores offsets)."""
    args = [a for t in topics for a in ("--topic", t)]
    r = kafkactl("offsets", "reset", "-G", group, *args, "--to-latest", "--execute",
                 "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr


def _gone(b: BrokerProcess, group: str) -> bool:
    r = _show(b, "-G", group)
    return r.returncode == 1 and f"Consumer group '{group}' does not exist." in r.stderr


def test_deleting_a_topic_removes_its_offsets_from_every_group(
        broker_factory: Any) -> None:
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "del1", 2)
    create_topic(b.bootstrap, "keep1", 1)
    produce(b.bootstrap, "del1", [f"old-{i}" for i in range(100)])
    produce(b.bootstrap, "keep1", [f"k-{i}" for i in range(10)])
    # a consumer group (with a generation) that only read del1, and a group that stores
    # offsets of both topics
    r = kafkactl("consume", "-G", "gDel", "-t", "del1", "-o", "earliest", "-e", "-q",
                 "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    assert sum(row["current_offset"] for row in _rows(b, "gDel").values()) == 100
    _commit(b, "gBoth", "del1", "keep1")
    assert set(_rows(b, "gBoth")) == {("del1", 0), ("del1", 1), ("keep1", 0)}

    r = kafkactl("topics", "delete", "-t", "del1", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: _gone(b, "gDel"), 30, "group gDel gone with its offsets")
    assert set(_rows(b, "gBoth")) == {("keep1", 0)}
    r = _show(b, "--all", "--json")
    assert r.returncode == 0, r.stderr
    assert {(row["group"], row["topic"]) for row in json.loads(r.stdout)} == \
        {("gBoth", "keep1")}
    assert "gDel" not in kafkactl("offsets", "list", "-b", b.bootstrap).stdout.split()

    # the tombstones hold after a restart (the offsets are replayed from the log)
    b.restart()
    wait_until(lambda: _gone(b, "gDel"), 30, "group gDel still gone after a restart")
    assert set(_rows(b, "gBoth")) == {("keep1", 0)}

    # a topic created again under the name starts without the old offsets: a group
    # consumer reads it from the start
    create_topic(b.bootstrap, "del1", 2)
    produce(b.bootstrap, "del1", [f"new-{i}" for i in range(150)])
    assert set(_rows(b, "gBoth")) == {("keep1", 0)}
    r = kafkactl("consume", "-G", "gDel", "-t", "del1", "-o", "earliest", "-e", "-q",
                 "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == sorted(f"new-{i}" for i in range(150))
    assert sum(row["current_offset"] for row in _rows(b, "gDel").values()) == 150


def test_offsets_that_outlived_their_topic_are_shown_skipped_and_deletable(
        broker_factory: Any) -> None:
    """A data dir whose __consumer_offsets still has offsets of a topic that no longer
    exists (as brokers before the deletion cleanup left them)."""
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "st1", 2)
    create_topic(b.bootstrap, "ok1", 1)
    produce(b.bootstrap, "st1", [f"s-{i}" for i in range(10)])
    produce(b.bootstrap, "ok1", [f"o-{i}" for i in range(10)])
    _commit(b, "gSt", "st1", "ok1")
    _commit(b, "gOk", "ok1")
    assert b.stop() == 0
    meta = b.data_dir / "topic-metadata.json"
    doc = json.loads(meta.read_text())
    del doc["topics"]["st1"]
    meta.write_text(json.dumps(doc))
    for p in (0, 1):
        shutil.rmtree(b.data_dir / f"st1-{p}")
    b.start()

    # one group: the stale rows have no log end offset or lag, and a warning says why
    r = _show(b, "-G", "gSt", "--json")
    assert r.returncode == 0, r.stderr
    rows = {(row["topic"], row["partition"]): row for row in json.loads(r.stdout)}
    assert set(rows) == {("st1", 0), ("st1", 1), ("ok1", 0)}
    assert rows[("st1", 0)]["current_offset"] + rows[("st1", 1)]["current_offset"] == 10
    assert all(rows[("st1", p)]["log_end_offset"] is None and rows[("st1", p)]["lag"] is None
               for p in (0, 1))
    assert rows[("ok1", 0)]["lag"] == 0
    assert "topic 'st1' does not exist" in r.stderr
    # every group: the others are shown too
    r = _show(b, "--all")
    assert r.returncode == 0, r.stderr
    lines = [ln.split() for ln in r.stdout.splitlines()]
    assert ["gOk", "ok1", "0", "10", "10", "0"] in [ln[:6] for ln in lines]
    stale = [ln for ln in lines if ln[:2] == ["gSt", "st1"]]
    assert len(stale) == 2 and all(ln[4:6] == ["-", "-"] for ln in stale), r.stdout
    # reset without --topic resets the offsets of the topics that exist
    r = kafkactl("offsets", "reset", "-G", "gSt", "--to-earliest", "--json",
                 "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    assert [(o["topic"], o["partition"]) for o in json.loads(r.stdout)["offsets"]] == \
        [("ok1", 0)]
    # delete --topic removes them (a dry run first)
    r = kafkactl("offsets", "delete", "-G", "gSt", "--topic", "st1", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    assert "Would delete the offset of st1-1" in r.stdout
    r = kafkactl("offsets", "delete", "-G", "gSt", "--topic", "st1", "--execute",
                 "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    assert "Deleted the offset of st1-0" in r.stdout and "Deleted the offset of st1-1" in r.stdout
    assert set(_rows(b, "gSt")) == {("ok1", 0)}
