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

import asyncio
import threading
import time
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode as E
from tests.groups.helpers import (
    FAST,
    RawMember,
    assignment,
    commit_offsets,
    connect,
    create_topic,
    describe_group,
    fetch_offsets,
    kafkactl,
    offsets_show,
    produce,
    send_commit,
    wait_commit,
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
    while codes and codes[-1] == E.UNKNOWN_MEMBER_ID:  # sent after the join completed
        codes.pop()
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


# ---- 4. offset retention ----------------------------------------------------------------
DAY_MS = 86_400_000


def test_offset_retention_rules_and_expiry_survives_restart(broker_factory: Any) -> None:
    """Kafka's rules (KIP-211, KIP-496): offsets of a group without members expire
    offsets.retention.minutes (7 days) after the group became Empty, or after the commit for
    a group that only stores offsets; an explicit retention (OffsetCommit v2-v4) sets the
    deadline; a live consumer group keeps the offsets of the topics it subscribes to whatever
    their age; the expiry is written to __consumer_offsets as tombstones."""
    b = broker_factory(**SHORT_SESSIONS, offsets_retention_check_interval_ms="200")
    create_topic(b.bootstrap, "ret", 2)
    create_topic(b.bootstrap, "unsub", 1)
    conn = connect(b.bootstrap)
    ancient = int(time.time() * 1000) - 8 * DAY_MS
    ok = {E.NONE}
    # Everything that must survive is committed first, with deadlines at or before those
    # of the offsets that must expire: once those are gone, the expiry pass that removed
    # them saw the survivors too (no timing involved).
    live = RawMember(b.bootstrap, "live", ["ret"], client_id="live")
    live.join()
    assert live.sync({live.member_id: assignment([("ret", 0), ("ret", 1)])})["error_code"] == 0
    assert set(live.commit({("ret", 0): 10}, version=2, retention_ms=300).values()) == ok
    assert set(live.commit({("ret", 1): 11}, version=1, commit_timestamp=ancient).values()) \
        == ok
    left = RawMember(b.bootstrap, "left", ["ret"], client_id="left")
    joined = left.join()
    assert joined["error_code"] == 0, joined
    assert left.sync({left.member_id: assignment([("ret", 0), ("ret", 1)])})["error_code"] == 0
    assert set(left.commit({("ret", 0): 20}, version=1, commit_timestamp=ancient).values()) \
        == ok
    # the doomed ones
    assert set(live.commit({("unsub", 0): 12}, version=1, commit_timestamp=ancient).values()) \
        == ok  # a topic the live group does not subscribe to (KIP-496)
    assert set(left.commit({("ret", 1): 21}, version=2, retention_ms=300).values()) == ok
    assert left.leave() == E.NONE
    wait_until(lambda: describe_group(conn, "left")["group_state"] == "Empty", 30,
               "group 'left' to be Empty")
    assert set(commit_offsets(conn, "simple", {("ret", 0): 30}, version=2,
                              retention_ms=300).values()) == ok
    assert set(commit_offsets(conn, "simple-old", {("ret", 0): 40}, version=1,
                              commit_timestamp=ancient).values()) == ok
    doomed = [("live", ("unsub", 0)), ("left", ("ret", 1)), ("simple", ("ret", 0)),
              ("simple-old", ("ret", 0))]

    def fetch(group: str, tp: tuple[str, int]) -> int:
        code, got = fetch_offsets(conn, group, [tp])
        assert code == E.NONE
        return got[tp]

    def all_expired() -> bool:
        assert live.heartbeat() == E.NONE  # the live group stays live
        return all(fetch(g, tp) == -1 for g, tp in doomed)

    wait_until(all_expired, 30, "the offsets to expire")
    survivors = {("live", ("ret", 0)): 10, ("live", ("ret", 1)): 11, ("left", ("ret", 0)): 20}
    for (g, tp), offset in survivors.items():
        assert fetch(g, tp) == offset, (g, tp)
    # groups left with no offsets and no members are deleted
    assert describe_group(conn, "simple")["group_state"] == "Dead"
    assert describe_group(conn, "left")["group_state"] == "Empty"
    # restart without any expiry pass: what was expired stays expired (tombstones), what
    # was kept is still there
    conn.close()
    live.close()
    left.close()
    b.stop()
    b.overrides["offsets.retention.check.interval.ms"] = "600000"
    b.start()
    conn = connect(b.bootstrap)
    wait_until(lambda: fetch_offsets(conn, "live", [("ret", 0)])[0] == E.NONE, 30,
               "__consumer_offsets to load")
    for g, tp in doomed:
        assert fetch(g, tp) == -1, (g, tp)
    for (g, tp), offset in survivors.items():
        assert fetch(g, tp) == offset, (g, tp)
    conn.close()


def test_a_member_between_its_two_joins_keeps_its_group_through_expiry(
        broker_factory: Any) -> None:
    """KIP-394: a new member's first JoinGroup only hands out its member id; until the second
    one the group it named has no members and no offsets, the kind of group an expiry pass
    deletes. The pass leaves it to the member on its way in (it answered the second join
    UNKNOWN_MEMBER_ID: the retention test above lost that race on a loaded machine)."""
    b = broker_factory(**SHORT_SESSIONS, offsets_retention_check_interval_ms="100")
    create_topic(b.bootstrap, "pend", 1)
    conn = connect(b.bootstrap)
    member = RawMember(b.bootstrap, "pending", ["pend"])
    first = member.conn.request(ApiKey.JOIN_GROUP, member.join_body(), version=5)
    assert first["error_code"] == E.MEMBER_ID_REQUIRED, first
    member.member_id = first["member_id"]
    # an offset that expires at the next pass: once it is gone, a pass has seen the group
    assert set(commit_offsets(conn, "marker", {("pend", 0): 1}, version=2,
                              retention_ms=1).values()) == {E.NONE}
    wait_until(lambda: fetch_offsets(conn, "marker", [("pend", 0)])[1][("pend", 0)] == -1,
               30, "an expiry pass")
    joined = member.end_join(member.conn.send(ApiKey.JOIN_GROUP, member.join_body(),
                                              version=5))
    assert joined["error_code"] == E.NONE, joined
    assert member.sync({member.member_id: assignment([("pend", 0)])})["error_code"] == E.NONE
    conn.close()
    member.close()


# ---- 5. answers while __consumer_offsets loads ------------------------------------------
def test_requests_while_offsets_load_after_restart(broker_factory: Any) -> None:
    """After a restart the coordinator replays __consumer_offsets (100,000 commits here,
    about two seconds of loading). Kafka's answers meanwhile: JoinGroup, OffsetCommit,
    OffsetFetch, DescribeGroups, ListGroups COORDINATOR_LOAD_IN_PROGRESS; SyncGroup
    REBALANCE_IN_PROGRESS (older clients do not expect the loading error); Heartbeat NONE
    (answered blindly); FindCoordinator answers. Every answer must be one of those or the
    right final one: never an empty or partial view of the group as if it were loaded.
    That the first requests land inside the loading window is very likely (they go out
    within milliseconds of the port opening) but timing, so it is reported, not asserted."""
    partitions, rounds = 50, 2000
    b = broker_factory(**FAST, offsets_topic_num_partitions="1")
    create_topic(b.bootstrap, "load", partitions)
    live = RawMember(b.bootstrap, "load-live", ["load"], session_ms=30000, client_id="live")
    live.join()
    mine = assignment([("load", p) for p in range(partitions)])
    assert live.sync({live.member_id: mine})["error_code"] == E.NONE
    assert set(live.commit({("load", 0): 7}).values()) == {E.NONE}
    conn = connect(b.bootstrap)
    pending = []
    for r in range(rounds):  # pipelined simple commits: one record per partition each
        pending.append(send_commit(conn, "big", {("load", p): r * 100 + p
                                                 for p in range(partitions)}))
        if len(pending) == 200 or r == rounds - 1:
            for req in pending:
                assert set(wait_commit(conn, req).values()) == {E.NONE}
            pending = []
    conn.close()
    expected = {("load", p): (rounds - 1) * 100 + p for p in range(partitions)}
    tps = sorted(expected)
    b.restart()

    conn = connect(b.bootstrap)
    live.reconnect()
    loading: dict[str, int] = {}
    done: set[str] = set()

    def answer(api: str, code: int, ok: bool, while_loading: set[int]) -> None:
        if code in while_loading and not ok:
            loading[api] = loading.get(api, 0) + 1
            assert api not in done, f"{api} answered {code} after a final answer"
        else:
            assert ok, f"{api} answered {code}: not a loading answer nor the right one"
            done.add(api)

    load = {E.COORDINATOR_LOAD_IN_PROGRESS}
    deadline = time.monotonic() + 60
    while len(done) < 8:
        assert time.monotonic() < deadline, f"still loading: {loading}"
        code, got = fetch_offsets(conn, "big", tps, version=7)
        answer("OffsetFetch v7", code, code == E.NONE and got == expected, load)
        r8 = conn.request(ApiKey.OFFSET_FETCH, {"groups": [{"group_id": "big", "topics": [
            {"name": "load", "partition_indexes": list(range(partitions))}]}],
            "require_stable": False}, version=8)["groups"][0]
        got8 = {("load", p["partition_index"]): p["committed_offset"]
                for t in r8["topics"] for p in t["partitions"]}
        answer("OffsetFetch v8", r8["error_code"], r8["error_code"] == E.NONE and
               got8 == expected, load)
        code = live.heartbeat()
        answer("Heartbeat", code, code == E.NONE, set())
        sync = live.sync()
        answer("SyncGroup", sync["error_code"],
               sync["error_code"] == E.NONE and sync["assignment"] == mine,
               {E.REBALANCE_IN_PROGRESS})
        d = describe_group(conn, "load-live")
        answer("DescribeGroups", d["error_code"], d["error_code"] == E.NONE and
               d["group_state"] == "Stable" and _member_ids(d) == {live.member_id}, load)
        lg = conn.request(ApiKey.LIST_GROUPS, {"states_filter": []}, version=3)
        answer("ListGroups", lg["error_code"], lg["error_code"] == E.NONE and
               {g["group_id"] for g in lg["groups"]} >= {"big", "load-live"}, load)
        j = conn.request(ApiKey.JOIN_GROUP, RawMember.join_body(live, ""), version=5)
        answer("JoinGroup", j["error_code"], j["error_code"] == E.MEMBER_ID_REQUIRED, load)
        c = live.commit({("load", 1): 9})
        answer("OffsetCommit", c[("load", 1)], c == {("load", 1): E.NONE}, load)
        fc = conn.request(ApiKey.FIND_COORDINATOR, {"key": "big", "key_type": 0}, version=2)
        assert fc["error_code"] == E.NONE and fc["port"] == b.port
    print(f"answers while loading: {loading}")
    # and it all holds together afterwards
    assert fetch_offsets(conn, "load-live", [("load", 0), ("load", 1)]) == \
        (E.NONE, {("load", 0): 7, ("load", 1): 9})
    assert live.heartbeat() == E.NONE
    assert describe_group(conn, "load-live")["group_state"] == "Stable"
    live.close()
    conn.close()


# ---- 6. a regex subscription through the CLI --------------------------------------------
def _consume_pattern(bootstrap: str, group: str, pattern: str) -> list[str]:
    r = kafkactl("consume", "--group", group, "--topic-pattern", pattern, "-e",
                 "-o", "earliest", "-q", "-b", bootstrap)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_cli_regex_subscription_consumes_and_commits_matching_topics(
        broker_factory: Any) -> None:
    b = broker_factory(**FAST)
    topics = {"rx-a": 2, "rx-b": 1, "other": 1, "xrx-c": 1}  # the pattern must match fully
    values = {t: [f"{t}:{i}" for i in range(30)] for t in topics}
    for t, n in topics.items():
        create_topic(b.bootstrap, t, n)
        produce(b.bootstrap, t, values[t])
    out = _consume_pattern(b.bootstrap, "RX", "rx-.*")
    assert sorted(out) == sorted(values["rx-a"] + values["rx-b"])
    shown = offsets_show(b.bootstrap, "RX")
    assert set(shown) == {("rx-a", 0), ("rx-a", 1), ("rx-b", 0)}
    assert all(r["current_offset"] == r["log_end_offset"] and r["lag"] == 0
               for r in shown.values())
    assert sum(r["current_offset"] for r in shown.values()) == 60
    # a matching topic created later is picked up on the next run, which resumes the
    # others from their committed offsets
    create_topic(b.bootstrap, "rx-new", 1)
    produce(b.bootstrap, "rx-new", ["rx-new:0", "rx-new:1"])
    produce(b.bootstrap, "rx-a", ["rx-a:late"])
    out = _consume_pattern(b.bootstrap, "RX", "rx-.*")
    assert sorted(out) == ["rx-a:late", "rx-new:0", "rx-new:1"]
    shown = offsets_show(b.bootstrap, "RX")
    assert set(shown) == {("rx-a", 0), ("rx-a", 1), ("rx-b", 0), ("rx-new", 0)}
    assert all(r["lag"] == 0 for r in shown.values())
    assert shown[("rx-new", 0)]["current_offset"] == 2


# ---- 7. aiokafka and confluent-kafka in one group ---------------------------------------
def test_aiokafka_and_confluent_share_a_group(broker_factory: Any) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP
    from confluent_kafka import Consumer, TopicPartition

    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "mix", 4)
    group = "mix-g"
    lock = threading.Lock()
    seen: dict[str, list[tuple[int, int, str]]] = {"aio": [], "cf": []}
    aio: dict[str, Any] = {"assignment": set(), "committed": None, "error": None}
    read_commits, stop = threading.Event(), threading.Event()

    async def aio_member() -> None:
        consumer = AIOKafkaConsumer(
            "mix", bootstrap_servers=b.bootstrap, group_id=group,
            auto_offset_reset="earliest", enable_auto_commit=False,
            heartbeat_interval_ms=500, session_timeout_ms=10000)
        await consumer.start()
        try:
            while not read_commits.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                with lock:
                    for tp, msgs in batches.items():
                        seen["aio"].extend((tp.partition, m.offset, m.value.decode())
                                           for m in msgs)
                    aio["assignment"] = {tp.partition for tp in consumer.assignment()}
                if batches:
                    await consumer.commit()
            aio["committed"] = {p: await consumer.committed(ATP("mix", p)) for p in range(4)}
            while not stop.is_set():
                await asyncio.sleep(0.1)
        finally:
            await consumer.stop()  # leaves the group

    def run_aio() -> None:
        try:
            asyncio.run(aio_member())
        except BaseException as e:  # surfaced by the main thread
            aio["error"] = e

    cf = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                   "auto.offset.reset": "earliest", "enable.auto.commit": False,
                   "heartbeat.interval.ms": 500, "session.timeout.ms": 10000})
    cf.subscribe(["mix"])

    def pump(seconds: float = 0.3) -> None:
        assert aio["error"] is None, aio["error"]
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            m = cf.poll(0.05)
            if m is not None and not m.error():
                with lock:
                    seen["cf"].append((m.partition(), m.offset(), m.value().decode()))

    thread = threading.Thread(target=run_aio, daemon=True)
    try:
        wait_until(lambda: (pump(), len(cf.assignment()) == 4)[1], 60,
                   "confluent to own all 4 partitions")
        thread.start()

        def split() -> bool:
            pump()
            with lock:
                mine, theirs = {tp.partition for tp in cf.assignment()}, aio["assignment"]
            return len(mine) == len(theirs) == 2 and mine | theirs == {0, 1, 2, 3}

        wait_until(split, 60, "the partitions to be split 2/2")
        admin = connect(b.bootstrap)
        wait_until(lambda: (pump(), describe_group(admin, group)["group_state"] == "Stable")[1],
                   30, "the group to be Stable")
        d = describe_group(admin, group)
        admin.close()
        # confluent offers range then roundrobin, aiokafka only roundrobin: the one
        # protocol every member supports wins
        assert d["protocol_data"] == "roundrobin" and len(d["members"]) == 2
        values = [f"mix-{i}" for i in range(400)]
        produce(b.bootstrap, "mix", values)  # after the split: nothing read twice
        wait_until(lambda: (pump(), len(seen["aio"]) + len(seen["cf"]) >= 400)[1], 60,
                   "400 records between the two members")
        pump(1.0)
        with lock:
            parts = {"aio": {p for p, _, _ in seen["aio"]}, "cf": {p for p, _, _ in seen["cf"]}}
            got = [v for _, _, v in seen["aio"] + seen["cf"]]
        assert sorted(got) == sorted(values)  # none missing, none twice
        assert parts["aio"] and parts["cf"] and not parts["aio"] & parts["cf"]
        cf.commit(asynchronous=False)
        ends: dict[int, int] = {}
        for p, o, _ in seen["aio"] + seen["cf"]:
            ends[p] = max(ends.get(p, 0), o + 1)
        read_commits.set()  # aiokafka reads every partition's committed offset
        wait_until(lambda: aio["committed"] is not None or aio["error"] is not None, 30,
                   "aiokafka to read the committed offsets")
        assert aio["error"] is None, aio["error"]
        assert aio["committed"] == ends  # confluent's commits are visible to aiokafka
        committed = cf.committed([TopicPartition("mix", p) for p in range(4)], timeout=20)
        assert {tp.partition: tp.offset for tp in committed} == ends  # and aiokafka's to it
    finally:
        read_commits.set()
        stop.set()
        if thread.is_alive():
            thread.join(30)
        cf.close()
    shown = offsets_show(b.bootstrap, group)
    assert {tp[1]: r["current_offset"] for tp, r in shown.items()} == ends
    assert all(r["lag"] == 0 for r in shown.values())
