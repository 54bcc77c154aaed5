"""Incremental UpdateMetadata, the request builder (cluster/controller_requests.py) and the
broker's cache (broker/zk_metadata_cache.py), through the real codec: an ISR change carries
only the changed partition and the live brokers; a deleted topic's partitions go with
leader -2 and leave the cache; partitions not mentioned keep their state and topics their
id; a request from another (controller epoch, broker epoch) is a full one and replaces the
cache. Property: after any sequence of changes, each announced incrementally, every
broker's cache equals the cache a full request of the controller's view gives."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.broker.metadata_cache import BrokerEndpoint
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache
from kafkactl.cluster import controller_requests as build
from kafkactl.cluster.broker_registry import BrokerInfo
from kafkactl.cluster.controller_requests import ClusterView
from kafkactl.cluster.topic_state import PartitionState
from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests.hypothesis_profiles import examples

TopicPartition = tuple[str, int]
BROKERS = (1, 2, 3)


def broker(b: int) -> BrokerInfo:
    return BrokerInfo(b, "127.0.0.1", 9090 + b, (f"PLAINTEXT://127.0.0.1:{9090 + b}",),
                      epoch=100 + b)


def make_view(topics: dict[str, int], controller_epoch: int = 5) -> ClusterView:
    """Three live brokers; each topic's partition p on brokers p, p+1, p+2 (mod 3), led by
    the first."""
    view = ClusterView(1, controller_epoch, brokers={b: broker(b) for b in BROKERS})
    for name, count in topics.items():
        add_topic(view, name, count)
    return view


def add_topic(view: ClusterView, name: str, count: int) -> list[TopicPartition]:
    view.assignments[name] = {}
    view.topic_ids[name] = uuid.uuid4()
    return add_partitions(view, name, count)


def add_partitions(view: ClusterView, name: str, count: int) -> list[TopicPartition]:
    parts = view.assignments[name]
    added = []
    for p in range(len(parts), len(parts) + count):
        replicas = [BROKERS[(p + i) % 3] for i in range(3)]
        parts[p] = replicas
        view.states[(name, p)] = PartitionState(replicas[0], 0, list(replicas),
                                                view.controller_epoch, 0)
        added.append((name, p))
    return added


def wire(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(encoded size, the request as a broker decodes it)."""
    frame = codec.encode_request(ApiKey.UPDATE_METADATA, build.UPDATE_METADATA_VERSION, 1,
                                 "controller", body)
    header, pos = codec.decode_request_header(frame[4:])
    assert header.api_key == ApiKey.UPDATE_METADATA
    return len(frame), codec.decode_request(ApiKey.UPDATE_METADATA,
                                            build.UPDATE_METADATA_VERSION, frame[4:], pos)


def new_cache(broker_id: int = 2) -> ZkMetadataCache:
    return ZkMetadataCache("c", BrokerEndpoint(broker_id, "127.0.0.1", 9090 + broker_id))


def snapshot(cache: ZkMetadataCache) -> dict[str, Any]:
    topics = {}
    for name in cache.topic_names():
        t = cache.topic(name)
        assert t is not None
        assert cache.topic_by_id(t.topic_id) is t
        topics[name] = (t.topic_id, {p: (m.leader, m.leader_epoch, m.replicas, m.isr,
                                         m.offline_replicas)
                                     for p, m in t.partitions.items()})
    return {"topics": topics, "brokers": [b.node_id for b in cache.brokers()],
            "controller": cache.controller_id()}


def full_snapshot(view: ClusterView, broker_id: int = 2) -> dict[str, Any]:
    cache = new_cache(broker_id)
    cache.apply_update_metadata(wire(build.update_metadata(view, broker_id))[1])
    return snapshot(cache)


def partition_indexes(body: dict[str, Any]) -> dict[str, list[int]]:
    return {t["topic_name"]: [p["partition_index"] for p in t["partition_states"]]
            for t in body["topic_states"]}


def test_an_isr_change_carries_only_the_changed_partition_and_every_live_broker() -> None:
    view = make_view({"orders": 40, "audit": 20})
    full_size, full = wire(build.update_metadata(view, 2))
    assert sum(len(v) for v in partition_indexes(full).values()) == 60

    old = view.states[("orders", 7)]
    view.states[("orders", 7)] = PartitionState(old.leader, old.leader_epoch, old.isr[:2],
                                                view.controller_epoch, old.zk_version + 1)
    size, incremental = wire(build.update_metadata(view, 2, {("orders", 7)}))
    assert partition_indexes(incremental) == {"orders": [7]}
    (state,) = incremental["topic_states"][0]["partition_states"]
    assert state["isr"] == old.isr[:2] and state["zk_version"] == old.zk_version + 1
    assert incremental["topic_states"][0]["topic_id"] == view.topic_ids["orders"]
    assert incremental["live_brokers"] == full["live_brokers"]
    assert [b["id"] for b in incremental["live_brokers"]] == list(BROKERS)
    assert (incremental["controller_epoch"], incremental["broker_epoch"]) == (5, 102)
    assert size * 10 < full_size

    cache = new_cache()
    cache.apply_update_metadata(full)
    cache.apply_update_metadata(incremental)
    assert snapshot(cache) == full_snapshot(view)


def test_a_deleted_topic_goes_with_leader_minus_2_and_leaves_the_cache() -> None:
    view = make_view({"keep": 3, "gone": 4})
    cache = new_cache()
    cache.apply_update_metadata(wire(build.update_metadata(view, 2))[1])
    kept_id = view.topic_ids["keep"]

    view.remove_topic("gone")
    body = build.update_metadata(view, 2, (), view.take_deleted())
    assert view.deleted == {}
    (gone,) = body["topic_states"]
    assert gone["topic_name"] == "gone"
    assert [(p["partition_index"], p["leader"]) for p in gone["partition_states"]] == \
        [(p, build.LEADER_DURING_DELETE) for p in range(4)]
    cache.apply_update_metadata(wire(body)[1])
    assert cache.topic_names() == ["keep"]
    keep = cache.topic("keep")
    assert keep is not None and keep.topic_id == kept_id and len(keep.partitions) == 3
    assert snapshot(cache) == full_snapshot(view)
    # a full request never lists a deleted topic
    view.remove_topic("keep")
    assert partition_indexes(build.update_metadata(view, 2, None, view.take_deleted())) == {}


def test_partitions_not_mentioned_keep_their_state_and_topics_their_id() -> None:
    view = make_view({"t": 3})
    cache = new_cache()
    cache.apply_update_metadata(wire(build.update_metadata(view, 2))[1])
    before = cache.topic("t")
    assert before is not None
    body = build.update_metadata(view, 2, {("t", 1)})
    body["topic_states"][0]["topic_id"] = build.NULL_UUID  # a sender that omits the id
    body["topic_states"][0]["partition_states"][0]["leader"] = 3
    cache.apply_update_metadata(wire(body)[1])
    after = cache.topic("t")
    assert after is not None and after is not before  # replaced, never changed in place
    assert after.topic_id == view.topic_ids["t"] and cache.topic_by_id(after.topic_id) is after
    assert after.partitions[1].leader == 3
    assert after.partitions[0] == before.partitions[0]
    assert after.partitions[2] == before.partitions[2]


def test_a_request_of_another_controller_or_broker_epoch_replaces_the_cache() -> None:
    """The first request of a new controller, or to this broker after it registered
    again, is a full one: a deletion this broker missed meanwhile does not linger."""
    view = make_view({"a": 2, "missed": 2})
    cache = new_cache()
    cache.apply_update_metadata(wire(build.update_metadata(view, 2))[1])
    view.remove_topic("missed")
    view.take_deleted()  # announced while this broker was away: it never saw it

    view.controller_epoch += 1  # a new controller: full to every broker
    cache.apply_update_metadata(wire(build.update_metadata(view, 2))[1])
    assert cache.topic_names() == ["a"]

    add_topic(view, "missed", 1)
    cache.apply_update_metadata(wire(build.update_metadata(view, 2, {("missed", 0)}))[1])
    view.remove_topic("missed")
    view.take_deleted()
    view.brokers[2] = BrokerInfo(2, "127.0.0.1", 9092, epoch=999)  # it registered again
    cache.apply_update_metadata(wire(build.update_metadata(view, 2))[1])
    assert snapshot(cache) == full_snapshot(view) and cache.topic_names() == ["a"]


def test_a_topic_created_again_replaces_the_old_one_and_a_late_deletion_spares_it() -> None:
    view = make_view({"t": 4})
    cache = new_cache()
    cache.apply_update_metadata(wire(build.update_metadata(view, 2))[1])
    old_id = view.topic_ids["t"]
    view.remove_topic("t")
    deleted = view.take_deleted()
    added = add_topic(view, "t", 2)  # created again with another id, fewer partitions
    cache.apply_update_metadata(wire(build.update_metadata(view, 2, added))[1])
    t = cache.topic("t")
    assert t is not None and t.topic_id == view.topic_ids["t"] != old_id
    assert sorted(t.partitions) == [0, 1]
    assert cache.topic_by_id(old_id) is None
    # the old topic's deletion arriving late (its id) leaves the new topic alone
    late = build.update_metadata(view, 2, (), {})
    late["topic_states"] = [{"topic_name": "t", "topic_id": old_id, "partition_states": [
        {"partition_index": p, "controller_epoch": 5, "leader": build.LEADER_DURING_DELETE,
         "leader_epoch": -1, "isr": [], "zk_version": -1, "replicas": r,
         "offline_replicas": []} for p, r in deleted["t"][1].items()]}]
    cache.apply_update_metadata(wire(late)[1])
    assert snapshot(cache) == full_snapshot(view)


# ---- property: incremental updates keep every cache equal to a full one -----------------

OPS = st.one_of(
    st.tuples(st.just("isr"), st.integers(0, 10_000), st.integers(1, 3)),
    st.tuples(st.just("leader"), st.integers(0, 10_000), st.integers(0, 2)),
    st.tuples(st.just("create"), st.integers(0, 4), st.integers(1, 4)),
    st.tuples(st.just("delete"), st.integers(0, 4), st.just(0)),
    st.tuples(st.just("grow"), st.integers(0, 4), st.integers(1, 3)),
    st.tuples(st.just("down"), st.sampled_from(BROKERS), st.just(0)),
    st.tuples(st.just("up"), st.sampled_from(BROKERS), st.just(0)),
)


def apply_op(view: ClusterView, op: tuple[str, int, int]) -> tuple[set[TopicPartition],
                                                                     set[int]]:
    """Change the view as a controller event would; (partitions whose metadata changed,
    brokers that joined: they get a full request)."""
    kind, a, b = op
    names = sorted(view.assignments)
    tps = sorted(view.states)
    if kind in ("isr", "leader") and tps:
        tp = tps[a % len(tps)]
        old = view.states[tp]
        replicas = view.assignments[tp[0]][tp[1]]
        if kind == "isr":
            new = PartitionState(old.leader, old.leader_epoch, replicas[:b],
                                 view.controller_epoch, old.zk_version + 1)
        else:
            new = PartitionState(replicas[b], old.leader_epoch + 1, list(replicas),
                                 view.controller_epoch, old.zk_version + 1)
        view.states[tp] = new
        return {tp}, set()
    if kind == "create":
        name = f"t{a}"
        if name in view.assignments:
            return set(), set()
        return set(add_topic(view, name, b)), set()
    if kind == "delete" and names:
        view.remove_topic(names[a % len(names)])
        return set(), set()
    if kind == "grow" and names:
        return set(add_partitions(view, names[a % len(names)], b)), set()
    if kind == "down" and a in view.brokers and len(view.brokers) > 1:
        del view.brokers[a]
        return view.partitions_on({a}), set()
    if kind == "up" and a not in view.brokers:
        view.brokers[a] = BrokerInfo(a, "127.0.0.1", 9090 + a, epoch=view.broker_epoch(a) + 7)
        return view.partitions_on({a}), {a}
    return set(), set()


@settings(max_examples=examples(60))
@given(st.lists(OPS, max_size=25))
def test_incremental_updates_keep_every_cache_equal_to_a_full_one(
        ops: list[tuple[str, int, int]]) -> None:
    view = make_view({"t0": 2, "t1": 3})
    caches = {b: new_cache(b) for b in BROKERS}
    for b, cache in caches.items():
        cache.apply_update_metadata(wire(build.update_metadata(view, b))[1])
    for op in ops:
        changed, joined = apply_op(view, op)
        deleted = view.take_deleted()
        for b in view.brokers:
            if b in joined:
                caches[b] = new_cache(b)  # a broker that restarted: an empty cache
                body = build.update_metadata(view, b)
            else:
                body = build.update_metadata(view, b, changed, deleted)
            caches[b].apply_update_metadata(wire(body)[1])
        for b in view.brokers:
            assert snapshot(caches[b]) == full_snapshot(view, b), (op, b)
