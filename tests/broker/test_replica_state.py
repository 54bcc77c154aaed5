"""The one partition lifecycle (kafkactl.broker.replica_state): a standalone broker's own
controller and a cluster's LeaderAndIsr/StopReplica go through the same steps, over a real
PartitionStore and LogManager in a temp dir. An internal topic's coordinator hears of each
partition it comes to lead or stops leading, in either mode."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from kafkactl.broker.replica_state import leader_state
from kafkactl.broker.standalone_topic_admin import METADATA_FILE
from kafkactl.cluster.metadata_store import (
    ConcurrentChangeError,
    LocalMetadataStore,
    TopicExistsError,
)
from kafkactl.cluster.topic_state import TopicAssignment
from kafkactl.protocol.errors import ErrorCode
from tests.broker.test_topic_admin import BROKER_ID, _open


class Listener:
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def elected(self, partition: int) -> None:
        self.events.append(("elected", partition))

    def resigned(self, partition: int) -> None:
        self.events.append(("resigned", partition))


def test_standalone_topics_reach_the_coordinator_through_the_lifecycle(tmp_path: Path) -> None:
    """The standalone controller's creations, growths and deletions of an internal topic
    elect and resign its coordinator partition by partition, as LeaderAndIsr and
    StopReplica do in a cluster; a restart elects every hosted partition again."""
    listener = Listener()
    s = _open(tmp_path, {"__internal": listener})
    s.admin.auto_create("__internal", 2)
    assert listener.events == [("elected", 0), ("elected", 1)]
    s.admin.add_partitions("__internal", 3, [])
    assert listener.events[-1] == ("elected", 2)
    for p in range(3):
        part = s.store.get_partition("__internal", p)
        assert part is not None and part.is_leader and part.leader_id == BROKER_ID
        assert (part.isr, part.replicas) == ([BROKER_ID], [BROKER_ID])
    s.log_manager.shutdown()

    listener2 = Listener()
    s = _open(tmp_path, {"__internal": listener2})  # a restart
    assert sorted(listener2.events) == [("elected", 0), ("elected", 1), ("elected", 2)]
    s.admin.delete_topic("__internal")
    assert sorted(e for e in listener2.events if e[0] == "resigned") == [
        ("resigned", 0), ("resigned", 1), ("resigned", 2)]
    assert s.store.logs_on_disk() == []
    s.log_manager.shutdown()


def test_leader_and_isr_states_follow_kafkas_epoch_rules(tmp_path: Path) -> None:
    """A whole request: partitions made and led; an older leader epoch than the hosted one
    is STALE_CONTROLLER_EPOCH and changes nothing; a newer one starts a new term."""
    s = _open(tmp_path)
    states = s.admin.replicas
    assert states is not None
    listener = Listener()
    states.listeners["t"] = listener

    def request(epoch: int) -> list[dict[str, object]]:
        return [{"topic_name": "t", "partition_states": [
            {"partition_index": p, **leader_state(BROKER_ID, epoch)} for p in range(2)]}]

    topics = asyncio.run(states.become_leader_or_follower(request(3)))
    assert [e["error_code"] for e in topics[0]["partition_errors"]] == [ErrorCode.NONE] * 2
    stale = asyncio.run(states.become_leader_or_follower(request(2)))
    assert [e["error_code"] for e in stale[0]["partition_errors"]] == \
        [ErrorCode.STALE_CONTROLLER_EPOCH] * 2
    part = s.store.get_partition("t", 0)
    assert part is not None and part.leader_epoch == 3
    asyncio.run(states.become_leader_or_follower(request(4)))
    assert part.leader_epoch == 4
    assert listener.events.count(("elected", 0)) == 2  # epochs 3 and 4, not the stale one
    errors = asyncio.run(states.stop_replicas([{"topic_name": "t", "partition_states": [
        {"partition_index": 0, "delete_partition": True, "leader_epoch": -2},
        {"partition_index": 1, "delete_partition": False, "leader_epoch": -1}]}]))
    assert [e["error_code"] for e in errors] == [ErrorCode.NONE] * 2
    assert s.store.get_partition("t", 0) is None  # deleted, on a worker thread
    assert ("t", 0) not in s.store.logs_on_disk()
    kept = s.store.get_partition("t", 1)
    assert kept is not None and not kept.is_leader  # stopped, its log kept
    assert listener.events[-2:] == [("resigned", 1), ("resigned", 0)]
    s.log_manager.shutdown()


def test_local_metadata_store_keeps_the_file_layout(tmp_path: Path) -> None:
    """topic-metadata.json as standalone brokers have always written it (version 1: id,
    partition count and configs per topic; the topics being deleted), read back whole."""
    path = tmp_path / METADATA_FILE
    store = LocalMetadataStore(path, broker_id=4)
    store.create_topic(TopicAssignment("a", {0: [4], 1: [4]}, uuid.uuid4()),
                       {"retention.ms": "1"})
    with pytest.raises(TopicExistsError):
        store.create_topic(TopicAssignment("a", {0: [4]}, None), {})
    store.create_topic(TopicAssignment("b", {0: [4]}, None), {})
    store.mark_for_deletion("b")
    with pytest.raises(TopicExistsError):  # until its deletion is finished
        store.create_topic(TopicAssignment("b", {0: [4]}, None), {})
    with pytest.raises(ConcurrentChangeError):
        store.set_assignment(TopicAssignment("gone", {0: [4]}, None))
    assert store.write_topic_config("a", {"retention.ms": "2"}) == 1
    doc = json.loads(path.read_text())
    assert doc["version"] == 1 and doc["deleting"] == ["b"]
    assert doc["topics"]["a"]["partitions"] == 2
    assert doc["topics"]["a"]["configs"] == {"retention.ms": "2"}
    again = LocalMetadataStore(path, broker_id=4)
    again.read()
    a = again.read_assignment("a")
    assert a is not None and a.partitions == {0: [4], 1: [4]}
    assert again.read_topic_config("a") == {"retention.ms": "2"} and again.deleting == {"b"}
    again.finish_deletion("b")
    assert "deleting" not in json.loads(path.read_text())
