"""The group coordinator's harder semantics on a real `kafkactl serve`, with real requests at
the versions real clients send (see helpers.RawMember) and with real clients:

* static membership (KIP-345): rejoin without a rebalance, fencing of the old member id,
  removal by instance id, static members surviving a rebalance timeout;
* session and rebalance timeouts;
* offset retention (KIP-211 and KIP-496 rules, explicit retention of OffsetCommit v2-v4),
  expiry surviving a restart;
* what each API answers while __consumer_offsets is loading after a restart;
* a regex subscription through `kafkactl consume --group`;
* aiokafka and confluent-kafka members of one group.
"""

from __future__ import annotations

import time
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode as E
from tests.groups.helpers import (
    FAST,
    RawMember,
    assignment,
    connect,
    create_topic,
    describe_group,
    fetch_offsets,
    wait_until,
)

JAVA = {"join_version": 7, "sync_version": 5, "heartbeat_version": 4}  # Java client's
SHORT_SESSIONS = {**FAST, "group_min_session_timeout_ms": "500"}


def _split(topic: str, partitions: int, members: list[RawMember]
           ) -> dict[str, list[tuple[str, int]]]:
    out: dict[str, list[tuple[str, int]]] = {m.member_id: [] for m in members}
    for p in range(partitions):
        out[members[p % len(members)].member_id].append((topic, p))
    return out


def _form_group(leader: RawMember, followers: list[RawMember], topic: str,
                partitions: int) -> dict[str, list[tuple[str, int]]]:
    """Leader joins alone, then the followers join and the leader rejoins when its heartbeat
    says so: every member ends in the same generation with a round-robin assignment."""
    r = leader.join()
    assert r["error_code"] == E.NONE and r["leader"] == leader.member_id, r
    s = leader.sync({leader.member_id: assignment([(topic, p) for p in range(partitions)])})
    assert s["error_code"] == E.NONE, s
    reqs = [f.start_join() for f in followers]
    conn = connect(leader.bootstrap)
    try:
        wait_until(lambda: len(describe_group(conn, leader.group)["members"]) ==
                   1 + len(followers), 30, "the followers to park in JoinGroup")
    finally:
        conn.close()
    assert leader.heartbeat() == E.REBALANCE_IN_PROGRESS
    r = leader.join()
    assert r["error_code"] == E.NONE and r["leader"] == leader.member_id, r
    for f, req in zip(followers, reqs, strict=True):
        rf = f.end_join(req)
        assert rf["error_code"] == E.NONE and rf["generation_id"] == leader.generation, rf
    split = _split(topic, partitions, [leader, *followers])
    syncs = [f.start_sync() for f in followers]
    s = leader.sync({m: assignment(tps) for m, tps in split.items()})
    assert s["error_code"] == E.NONE and s["assignment"] == assignment(split[leader.member_id])
    for f, req in zip(followers, syncs, strict=True):
        sf = f.end_sync(req)
        assert sf["error_code"] == E.NONE and sf["assignment"] == assignment(split[f.member_id])
    return split


def _member_ids(entry: dict[str, Any]) -> set[str]:
    return {m["member_id"] for m in entry["members"]}


# ---- 1. static membership ---------------------------------------------------------------
def test_static_member_rejoins_without_rebalance_and_old_id_is_fenced(
        broker_factory: Any) -> None:
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "st", 4)
    a = RawMember(b.bootstrap, "static-g", ["st"], instance_id="inst-a", client_id="a", **JAVA)
    s = RawMember(b.bootstrap, "static-g", ["st"], instance_id="inst-b", client_id="b", **JAVA)
    split = _form_group(a, [s], "st", 4)
    gen = a.generation
    admin = connect(b.bootstrap)

    # B restarts: a new connection, member id "", the same instance id and protocols
    old_b = s.member_id
    s.reconnect()
    s.member_id = ""
    r = s.join()
    assert r["error_code"] == E.NONE
    assert r["member_id"] and r["member_id"] != old_b
    assert r["generation_id"] == gen  # no rebalance
    assert r["leader"] == a.member_id and r["members"] == []
    sync = s.sync()
    assert sync["error_code"] == E.NONE
    assert sync["assignment"] == assignment(split[old_b])  # the same partitions as before
    assert a.heartbeat() == E.NONE  # the other member was not told to rejoin
    d = describe_group(admin, "static-g", version=5)
    assert d["group_state"] == "Stable" and _member_ids(d) == {a.member_id, s.member_id}
    assert {m["group_instance_id"] for m in d["members"]} == {"inst-a", "inst-b"}

    # the old member id (a zombie of the previous B) is fenced everywhere
    assert s.heartbeat(member_id=old_b) == E.FENCED_INSTANCE_ID
    assert set(s.commit({("st", 2): 5}, member_id=old_b, version=8).values()) == \
        {E.FENCED_INSTANCE_ID}
    assert s.sync(member_id=old_b)["error_code"] == E.FENCED_INSTANCE_ID
    zombie = s.conn.request(ApiKey.JOIN_GROUP, s.join_body(old_b), version=7)
    assert zombie["error_code"] == E.FENCED_INSTANCE_ID
    # ... while the new one works
    assert s.heartbeat() == E.NONE
    assert set(s.commit({("st", 2): 5}, version=8).values()) == {E.NONE}

    # the static leader restarts too: same generation, and it is not told it leads (the
    # group is stable, so it has no assignment to compute and SyncGroup gives its old one)
    old_a = a.member_id
    a.reconnect()
    a.member_id = ""
    r = a.join()
    assert r["error_code"] == E.NONE and r["generation_id"] == gen
    assert r["member_id"] != old_a
    assert r["leader"] != r["member_id"] and r["members"] == []
    sync = a.sync()
    assert sync["error_code"] == E.NONE and sync["assignment"] == assignment(split[old_a])
    assert s.heartbeat() == E.NONE
    assert a.heartbeat(member_id=old_a) == E.FENCED_INSTANCE_ID
    assert describe_group(admin, "static-g")["group_state"] == "Stable"

    # LeaveGroup v4 by instance id (AdminClient.removeMembersFromConsumerGroup's request)
    resp = admin.request(ApiKey.LEAVE_GROUP, {"group_id": "static-g", "members": [
        {"member_id": "", "group_instance_id": "inst-b"},
        {"member_id": "", "group_instance_id": "inst-unknown"},
        {"member_id": "not-a's-id", "group_instance_id": "inst-a"}]}, version=4)
    assert resp["error_code"] == E.NONE
    assert [m["error_code"] for m in resp["members"]] == \
        [E.NONE, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID]
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS  # B's removal rebalances the group
    r = a.join()
    assert r["error_code"] == E.NONE and r["generation_id"] == gen + 1
    assert [m["member_id"] for m in r["members"]] == [a.member_id]
    assert r["leader"] == a.member_id
    assert a.sync({a.member_id: assignment([("st", p) for p in range(4)])})["error_code"] == 0
    d = describe_group(admin, "static-g")
    assert d["group_state"] == "Stable" and _member_ids(d) == {a.member_id}
    assert s.heartbeat() == E.UNKNOWN_MEMBER_ID  # removed, and inst-b fences nobody now
    # the committed offset of the removed member stays
    assert fetch_offsets(admin, "static-g", [("st", 2)]) == (E.NONE, {("st", 2): 5})
    for m in (a, s):
        m.close()
    admin.close()


def test_rebalance_timeout_keeps_static_member_and_elects_a_joined_leader(
        broker_factory: Any) -> None:
    """Kafka drops only *dynamic* members that miss the rebalance timeout: a static member
    (here the leader) keeps its place and its partitions, a member that did rejoin leads."""
    b = broker_factory(**SHORT_SESSIONS)
    create_topic(b.bootstrap, "sk", 4)
    s = RawMember(b.bootstrap, "static-k", ["sk"], instance_id="inst-s", rebalance_ms=1500,
                  client_id="s", **JAVA)
    d = RawMember(b.bootstrap, "static-k", ["sk"], rebalance_ms=1500, client_id="d", **JAVA)
    _form_group(s, [d], "sk", 4)
    gen = s.generation
    # a newcomer E starts a rebalance; D rejoins, S keeps heartbeating but never rejoins
    e = RawMember(b.bootstrap, "static-k", ["sk"], rebalance_ms=1500, client_id="e", **JAVA)
    join_e = e.start_join()
    wait_until(lambda: d.heartbeat() == E.REBALANCE_IN_PROGRESS, 30, "D to be told to rejoin")
    join_d = d.start_join()
    codes: list[int] = []
    deadline = time.monotonic() + 30
    while not (join_d.done and join_e.done):
        assert time.monotonic() < deadline, "the rebalance did not end"
        codes.append(s.heartbeat())
        d.conn.poll(0.1)
        e.conn.poll(0.1)
    rd, re_ = d.end_join(join_d), e.end_join(join_e)
    assert rd["error_code"] == re_["error_code"] == E.NONE
    assert rd["generation_id"] == re_["generation_id"] == gen + 1
    # the static leader did not rejoin: one of the members that did leads now
    assert rd["leader"] == re_["leader"] and rd["leader"] in {d.member_id, e.member_id}
    leader, follower = (d, e) if rd["leader"] == d.member_id else (e, d)
    assert follower.members == []
    assert {m["member_id"] for m in leader.members} == {d.member_id, e.member_id, s.member_id}
    assert {m["group_instance_id"] for m in leader.members} == {None, "inst-s"}
    assert codes and set(codes) <= {E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION}
    split = _split("sk", 4, [d, e, s])
    sync_f = follower.start_sync()
    assert leader.sync({m: assignment(t) for m, t in split.items()})["error_code"] == E.NONE
    assert follower.end_sync(sync_f)["assignment"] == assignment(split[follower.member_id])
    # S learns of the new generation, rejoins with its member id and gets its partitions
    # without another rebalance
    assert s.heartbeat() == E.ILLEGAL_GENERATION
    r = s.join()
    assert r["error_code"] == E.NONE and r["generation_id"] == gen + 1
    sync = s.sync()
    assert sync["error_code"] == E.NONE and sync["assignment"] == assignment(split[s.member_id])
    assert d.heartbeat() == e.heartbeat() == s.heartbeat() == E.NONE
    for x in (s, d, e):
        x.close()


# ---- 2. session timeout -----------------------------------------------------------------
def test_session_timeout_removes_silent_members(broker_factory: Any) -> None:
    b = broker_factory(**SHORT_SESSIONS)
    create_topic(b.bootstrap, "sess", 2)
    a = RawMember(b.bootstrap, "sess-g", ["sess"], session_ms=1500, client_id="a")
    m = RawMember(b.bootstrap, "sess-g", ["sess"], session_ms=1500, client_id="m")
    _form_group(a, [m], "sess", 2)
    gen = a.generation
    assert set(a.commit({("sess", 0): 3}).values()) == {E.NONE}
    # M stops heartbeating; A goes on until the coordinator tells it to rejoin
    codes: list[int] = []

    def a_told_to_rejoin() -> bool:
        codes.append(a.heartbeat())
        return codes[-1] == E.REBALANCE_IN_PROGRESS

    wait_until(a_told_to_rejoin, 30, "A to be told to rejoin")
    assert set(codes[:-1]) <= {E.NONE}
    r = a.join()
    assert r["error_code"] == E.NONE and r["generation_id"] == gen + 1
    assert [x["member_id"] for x in r["members"]] == [a.member_id]  # M is gone
    assert a.sync({a.member_id: assignment([("sess", 0), ("sess", 1)])})["error_code"] == 0
    assert m.heartbeat() == E.UNKNOWN_MEMBER_ID
    admin = connect(b.bootstrap)
    d = describe_group(admin, "sess-g")
    assert d["group_state"] == "Stable" and _member_ids(d) == {a.member_id}
    # the lone member goes silent too: the group is left Empty, its offsets stay
    wait_until(lambda: describe_group(admin, "sess-g")["group_state"] == "Empty", 30,
               "the group to become Empty")
    assert describe_group(admin, "sess-g")["members"] == []
    assert a.heartbeat() == E.UNKNOWN_MEMBER_ID
    assert fetch_offsets(admin, "sess-g", [("sess", 0)]) == (E.NONE, {("sess", 0): 3})
    for c in (a, m):
        c.close()
    admin.close()


# ---- 3. rebalance timeout ---------------------------------------------------------------
def test_rebalance_timeout_drops_member_that_does_not_rejoin(broker_factory: Any) -> None:
    b = broker_factory(**SHORT_SESSIONS)
    create_topic(b.bootstrap, "rt", 3)
    a = RawMember(b.bootstrap, "rt-g", ["rt"], rebalance_ms=1500, client_id="a")
    m = RawMember(b.bootstrap, "rt-g", ["rt"], rebalance_ms=1500, client_id="m")
    _form_group(a, [m], "rt", 3)
    gen = a.generation
    # the leader rejoins (a rebalance starts) and a newcomer joins during it; M keeps its
    # session alive with heartbeats but never rejoins, so only the rebalance timeout can end
    # the join
    join_a = a.start_join()
    c = RawMember(b.bootstrap, "rt-g", ["rt"], rebalance_ms=1500, client_id="c")
    join_c = c.start_join()
    codes: list[int] = []
    deadline = time.monotonic() + 30
    while not (join_a.done and join_c.done):
        assert time.monotonic() < deadline, "the join never completed"
        codes.append(m.heartbeat())
        a.conn.poll(0.1)
        c.conn.poll(0.1)
    ra, rc = a.end_join(join_a), c.end_join(join_c)
    assert ra["error_code"] == rc["error_code"] == E.NONE
    assert ra["generation_id"] == rc["generation_id"] == gen + 1
    assert {x["member_id"] for x in ra["members"]} == {a.member_id, c.member_id}
    assert codes and set(codes) == {E.REBALANCE_IN_PROGRESS}  # M was alive throughout
    assert m.heartbeat() == E.UNKNOWN_MEMBER_ID
    assert m.conn.request(ApiKey.JOIN_GROUP, m.join_body(), version=5)["error_code"] == \
        E.UNKNOWN_MEMBER_ID
    split = _split("rt", 3, [a, c])
    sync_c = c.start_sync()
    assert a.sync({x: assignment(t) for x, t in split.items()})["error_code"] == E.NONE
    assert c.end_sync(sync_c)["assignment"] == assignment(split[c.member_id])
    admin = connect(b.bootstrap)
    d = describe_group(admin, "rt-g")
    assert d["group_state"] == "Stable" and _member_ids(d) == {a.member_id, c.member_id}
    for x in (a, m, c):
        x.close()
    admin.close()
