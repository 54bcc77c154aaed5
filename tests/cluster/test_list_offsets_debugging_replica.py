"""ListOffsets from replica_id -2 (Kafka's DEBUGGING_REPLICA_ID) is answered by a follower
too, from its own log: KafkaApis passes `fetchOnlyFromLeader = replicaId !=
DEBUGGING_REPLICA_ID`, and as for any replica_id other than -1 no isolation level applies
(latest is the replica's log end, a timestamp lookup sees up to it). A consumer (-1) or a
broker id asking a follower still gets NOT_LEADER_OR_FOLLOWER, and a broker with no replica
NOT_LEADER_OR_FOLLOWER whoever asks. current_leader_epoch is checked against the
follower's leader epoch (Kafka's checkCurrentLeaderEpoch): older FENCED_LEADER_EPOCH, newer
UNKNOWN_LEADER_EPOCH. Two real brokers on a real ZooKeeper; raw requests of every version."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode as E
from tests.broker.wire import Wire, batch
from tests.cluster.cluster_helpers import request, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

TOPIC, SOLO = "dbg", "dbg-solo"
T0 = 1_700_000_000_000
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
DEBUGGING = -2


def _kafkactl(*args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "kafkactl", *args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def _list(port: int, version: int, replica_id: int, timestamp: int, *, topic: str = TOPIC,
          epoch: int = -1, isolation: int = 0) -> dict[str, Any]:
    resp = request(port, ApiKey.LIST_OFFSETS, version, {
        "replica_id": replica_id, "isolation_level": isolation,
        "topics": [{"name": topic, "partitions": [{
            "partition_index": 0, "current_leader_epoch": epoch, "timestamp": timestamp,
            "max_num_offsets": 1}]}]})
    return dict(resp["topics"][0]["partitions"][0])


def _answer(port: int, version: int, replica_id: int, timestamp: int,
            **kw: Any) -> tuple[int, int, int]:
    """(error, offset, timestamp) as a v1+ answer; v0's offset is its one old-style offset."""
    p = _list(port, version, replica_id, timestamp, **kw)
    if version == 0:
        offsets = p["old_style_offsets"]
        return p["error_code"], offsets[0] if offsets else -1, -1
    return p["error_code"], p["offset"], p["timestamp"]


def test_a_follower_answers_the_debugging_replica(broker_factory: Any,
                                                  zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, zookeeper, (1, 2), replica_fetch_backoff_ms="100")
    _kafkactl("topics", "create", "-t", TOPIC, "--replica-assignment", "1:2",
              "-b", cluster.bootstrap)
    _kafkactl("topics", "create", "-t", SOLO, "--replica-assignment", "1",
              "-b", cluster.bootstrap)
    cluster.wait_for_leaders(TOPIC, 1, expect=lambda ls: ls[0] == 1)
    cluster.wait_for_leaders(SOLO, 1)
    leader, follower = cluster.brokers[1], cluster.brokers[2]
    with Wire(leader.bootstrap, timeout=30) as w:
        for i in range(3):  # offsets 0-1 at T0, 2-3 at T0+1000, 4-5 at T0+2000
            r = w.produce(TOPIC, batch([b"a%d" % i, b"b%d" % i], timestamp=T0 + 1000 * i),
                          acks=-1)
            assert r["error_code"] == 0, r
    wait_until(lambda: _answer(follower.port, 1, DEBUGGING, LATEST) == (0, 6, -1), 30,
               "the follower's log end at 6")
    epoch = _list(leader.port, 7, -1, LATEST)["leader_epoch"]
    assert epoch >= 0

    for v in range(8):
        # a consumer or a follower's broker id: only the leader answers
        for rid in (-1, 2):
            assert _list(follower.port, v, rid, LATEST)["error_code"] == \
                E.NOT_LEADER_OR_FOLLOWER, (v, rid)
        # the debugging replica: the follower's own log (v0: getOffsetsBefore)
        assert _answer(follower.port, v, DEBUGGING, EARLIEST)[:2] == (0, 0), v
        assert _answer(follower.port, v, DEBUGGING, LATEST)[:2] == (0, 6), v
        if v >= 1:
            assert _answer(follower.port, v, DEBUGGING, T0 + 1000) == (0, 2, T0 + 1000), v
            assert _answer(follower.port, v, DEBUGGING, T0 + 1500) == (0, 4, T0 + 2000), v
            assert _answer(follower.port, v, DEBUGGING, T0 + 2001) == (0, -1, -1), v
        if v >= 2:  # isolation_level is a consumer's: ignored for -2
            assert _answer(follower.port, v, DEBUGGING, LATEST, isolation=1)[:2] == (0, 6)
        if v >= 4:
            assert _list(follower.port, v, DEBUGGING, LATEST)["leader_epoch"] == epoch
            assert _answer(follower.port, v, DEBUGGING, LATEST, epoch=epoch)[:2] == (0, 6)
            assert _answer(follower.port, v, DEBUGGING, LATEST, epoch=epoch + 1)[0] == \
                E.UNKNOWN_LEADER_EPOCH
        if v >= 7:
            assert _answer(follower.port, v, DEBUGGING, MAX_TIMESTAMP) == (0, 4, T0 + 2000)
        # the leader answers the debugging replica the same
        assert _answer(leader.port, v, DEBUGGING, LATEST)[:2] == (0, 6), v
        # a broker without a replica, and a topic nobody has
        assert _list(follower.port, v, DEBUGGING, LATEST, topic=SOLO)["error_code"] == \
            E.NOT_LEADER_OR_FOLLOWER, v
        assert _list(follower.port, v, DEBUGGING, LATEST, topic="no-such")["error_code"] \
            == E.UNKNOWN_TOPIC_OR_PARTITION, v

    # the leader moves to broker 2 (epoch + 1); broker 1 comes back as its follower: a
    # current_leader_epoch older than its epoch is fenced
    leader.stop()
    cluster.wait_for_leaders(TOPIC, 1, expect=lambda ls: ls[0] == 2)
    leader.start()
    new_epoch = wait_until(
        lambda: (p := _list(follower.port, 7, -1, LATEST))["error_code"] == 0 and
        p["leader_epoch"] > epoch and p["leader_epoch"], 30, "broker 2 leading")
    wait_until(lambda: _answer(leader.port, 7, DEBUGGING, LATEST, epoch=new_epoch)
               == (0, 6, -1), 30, "broker 1 following at the new epoch")
    assert _answer(leader.port, 7, DEBUGGING, LATEST, epoch=epoch)[0] == \
        E.FENCED_LEADER_EPOCH
    assert _answer(leader.port, 7, DEBUGGING, LATEST, epoch=new_epoch + 1)[0] == \
        E.UNKNOWN_LEADER_EPOCH
    assert _answer(leader.port, 7, -1, LATEST)[0] == E.NOT_LEADER_OR_FOLLOWER
    # the new leader fences a consumer's old epoch the same
    assert _answer(follower.port, 7, -1, LATEST, epoch=epoch)[0] == E.FENCED_LEADER_EPOCH
    assert _answer(follower.port, 7, -1, LATEST, epoch=new_epoch)[:2] == (0, 6)
