"""The clients on a three-broker cluster when a partition loses its leader: consumers and
producers follow a new leader elected after the old one was SIGKILLed (a connection
failure is a reason to look the leaders up again, with a backoff), and a partition with no
leader at all holds up only itself: produce, consume and `topics offsets` of the other
partitions of the topic go on at once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.cluster.cluster_helpers import (
    SESSION_TIMEOUT_MS,
    Cluster,
    metadata,
    request,
    start_cluster,
)
from tests.polling import wait_until

OVERRIDES = {"default_replication_factor": "3", "offsets_topic_replication_factor": "3",
             "offsets_topic_num_partitions": "3", "replica_lag_time_max_ms": "3000",
             "replica_fetch_backoff_ms": "100"}
ELECTION_S = SESSION_TIMEOUT_MS / 1000 + 20


@pytest.fixture
def cluster(broker_factory, zookeeper):  # type: ignore[no-untyped-def]
    return start_cluster(broker_factory, zookeeper, **OVERRIDES)


def create(cluster: Cluster, name: str, partitions: int, rf: int) -> None:
    from kafkactl.client.admin import AdminClient

    with AdminClient(cluster.bootstrap) as admin:
        errors = admin.create_topics({name: (partitions, rf, {})})
    assert errors == {name: None}, errors


def state(cluster: Cluster, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, isr) as the first live broker reports it."""
    md = metadata(cluster.live()[0].port, [topic])
    return {p["partition_index"]: (p["leader_id"], sorted(p["isr_nodes"]))
            for t in md["topics"] if t["name"] == topic for p in t["partitions"]}


def settled(cluster: Cluster, topic: str, partitions: int, isr: int) -> dict[int, int]:
    """partition -> leader once every partition has a leader and `isr` in-sync replicas."""
    def ok() -> dict[int, int] | None:
        st = state(cluster, topic)
        good = len(st) == partitions and all(lead >= 0 and len(i) == isr
                                             for lead, i in st.values())
        return {p: lead for p, (lead, _) in st.items()} if good else None
    return wait_until(ok, 30, f"{topic}: leaders with {isr} in-sync replicas")


def start_cli(argv: list[str], log: Path) -> Any:
    """`kafkactl ARGV` in the background, its stdout and stderr appended to `log`."""
    proc: Any = zygote.spawn(argv, str(log))
    if proc is None:  # KAFKACTL_TEST_FORK=0
        with open(log, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "kafkactl", *argv], stdout=out,
                                    stderr=subprocess.STDOUT)
    return proc


def printed(log: Path) -> set[str]:
    return set(log.read_text(errors="replace").split()) if log.exists() else set()


def test_consumers_and_a_producer_follow_the_new_leader_after_a_sigkill(
        cluster: Cluster, tmp_path: Path) -> None:
    """`consume` with and without a group, and a producer that stays open, keep working
    with a partition whose leader was SIGKILLed once the cluster has elected another:
    what is produced to it afterwards is printed (the old code kept fetching from the dead
    broker until it came back)."""
    from kafkactl.client.producer import Producer

    create(cluster, "kc3", 3, 3)
    settled(cluster, "kc3", 3, 3)
    producer = Producer(cluster.bootstrap, linger_ms=1)
    try:
        futures = [producer.send("kc3", f"before-{p}-{i}".encode(), partition=p)
                   for p in range(3) for i in range(3)]
        for f in futures:
            f.result(timeout=20)
        logs = {name: tmp_path / f"{name}.log" for name in ("group", "plain")}
        procs = [start_cli(["consume", "-b", cluster.bootstrap, "-t", "kc3", "-G", "g4",
                            "-o", "earliest"], logs["group"]),
                 start_cli(["consume", "-b", cluster.bootstrap, "-t", "kc3", "-o",
                            "earliest"], logs["plain"])]
        try:
            before = {f"before-{p}-{i}" for p in range(3) for i in range(3)}
            for name, log in logs.items():
                wait_until(lambda log=log: before <= printed(log), 30,
                           f"the {name} consumer's first records")
            # the partition to kill the leader of: partition 2 unless its leader is the
            # group's coordinator (whose death makes the member rejoin, which looked the
            # leaders up again even before the fix)
            port = cluster.live()[0].port
            coordinator = request(port, ApiKey.FIND_COORDINATOR, 3,
                                  {"key": "g4", "key_type": 0})["node_id"]
            lead = settled(cluster, "kc3", 3, 3)
            victim_partition = next((p for p in (2, 1, 0) if lead[p] != coordinator), 2)
            victim = lead[victim_partition]
            cluster.brokers[victim].kill()
            wait_until(lambda: state(cluster, "kc3")[victim_partition][0] not in (-1, victim),
                       ELECTION_S, "a new leader for the partition")
            after = [producer.send("kc3", f"after-{i}".encode(), partition=victim_partition)
                     for i in range(3)]
            for f in after:
                f.result(timeout=20)
            want = {f"after-{i}" for i in range(3)}
            for name, log in logs.items():
                wait_until(lambda log=log: want <= printed(log), 20,
                           f"the {name} consumer printing what the new leader has:\n"
                           f"{log.read_text(errors='replace')[-3000:]}")
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(20)
    finally:
        producer.close(10)


def test_a_partition_without_a_leader_holds_up_only_itself(cluster: Cluster) -> None:
    """With one partition of a topic offline (its only replica's broker stopped), produce,
    consume and `topics offsets` of the topic's other partitions complete while that one
    still has no leader; a record for the offline partition fails at delivery.timeout.ms
    naming it."""
    create(cluster, "r1", 3, 1)
    lead = settled(cluster, "r1", 3, 1)
    down = lead[0]
    healthy = sorted(p for p, b in lead.items() if b != down)
    if not healthy:
        pytest.skip(f"every partition of r1 landed on broker {down}: {lead}")
    part = healthy[0]
    b = cluster.bootstrap
    # the group's coordinator exists before (__consumer_offsets has 3 replicas)
    port = cluster.live()[0].port
    wait_until(lambda: request(port, ApiKey.FIND_COORDINATOR, 3,
                               {"key": "gl", "key_type": 0})["error_code"] == 0, 30,
               "a coordinator for group gl")
    # the group commits the start of every partition (r1-0's too) while all have leaders
    r = zygote.run(["consume", "-b", b, "-t", "r1", "-G", "gl", "-o", "earliest", "-e", "-q"],
                   text=True, timeout=25)
    assert r.returncode == 0, r.stderr
    cluster.brokers[down].stop()
    wait_until(lambda: state(cluster, "r1")[0][0] == -1, ELECTION_S, "r1-0 without a leader")

    def offline() -> bool:
        return state(cluster, "r1")[0][0] == -1

    r = zygote.run(["produce", "-b", b, "-t", "r1", "-p", str(part), "-q"],
                   input="x1\nx2\n", text=True, timeout=25)
    assert r.returncode == 0, r.stderr
    assert offline()  # ... done while r1-0 still has no leader

    r = zygote.run(["consume", "-b", b, "-t", "r1", "-p", str(part), "--from-beginning", "-e",
                    "-q"], text=True, timeout=25)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["x1", "x2"]
    assert offline()

    # the whole topic: the leaderless partition is skipped, the others are read
    r = zygote.run(["consume", "-b", b, "-t", "r1", "-o", "earliest", "-c", "2", "-q"],
                   text=True, timeout=25)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["x1", "x2"]
    assert offline()

    # a group member is assigned every partition, and reads those with a leader
    r = zygote.run(["consume", "-b", b, "-t", "r1", "-G", "gl", "-o", "earliest", "-c", "2",
                    "-q"], text=True, timeout=25)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["x1", "x2"]
    assert offline()

    # the group's table: r1-0's log end offset and lag unknown, the others' there
    r = zygote.run(["offsets", "show", "-G", "gl", "--json", "-b", b], text=True, timeout=25)
    assert r.returncode == 0, r.stderr
    import json

    table = {(x["topic"], x["partition"]): x for x in json.loads(r.stdout)}
    assert table[("r1", 0)]["current_offset"] == 0, table
    assert table[("r1", 0)]["log_end_offset"] is None and table[("r1", 0)]["lag"] is None
    assert (table[("r1", part)]["log_end_offset"], table[("r1", part)]["lag"]) == (2, 0)
    assert "r1-0" in r.stderr and "no leader" in r.stderr, r.stderr
    assert offline()

    r = zygote.run(["topics", "offsets", "-b", b, "-t", "r1"], text=True, timeout=25)
    assert r.returncode == 0, r.stderr
    rows = r.stdout.split()
    assert f"r1:{part}:2" in rows
    assert all(f"r1:{p}:0" in rows for p in healthy if p != part)
    assert not any(row.startswith("r1:0:") for row in rows)
    assert "r1:0" in r.stderr and "no leader" in r.stderr, r.stderr
    assert offline()

    # a record for the offline partition waits for a leader, then fails at
    # delivery.timeout.ms with an error naming the partition
    t0 = time.monotonic()
    r = zygote.run(["produce", "-b", b, "-t", "r1", "-p", "0", "-q",
                    "-X", "delivery.timeout.ms=3000", "-X", "request.timeout.ms=2000",
                    "-X", "linger.ms=0"], input="y\n", text=True, timeout=25)
    assert r.returncode != 0
    assert "r1-0" in r.stderr and "leader" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 20
    assert offline()


def test_a_producer_spreads_unkeyed_records_over_partitions_with_a_leader(
        cluster: Cluster) -> None:
    """Unkeyed records (sticky, roundrobin) go to partitions that have a leader while one
    is offline, and are all acknowledged; keyed records keep their partition."""
    from kafkactl.client.partitioner import murmur2_partition
    from kafkactl.client.producer import Producer

    create(cluster, "r2", 3, 1)
    lead = settled(cluster, "r2", 3, 1)
    down = lead[0]
    if all(b == down for b in lead.values()):
        pytest.skip(f"every partition of r2 landed on broker {down}: {lead}")
    cluster.brokers[down].stop()
    wait_until(lambda: state(cluster, "r2")[0][0] == -1, ELECTION_S, "r2-0 without a leader")
    offline = {p for p, b in lead.items() if b == down}
    for partitioner in ("murmur2", "roundrobin", "random"):
        with Producer(cluster.bootstrap, partitioner=partitioner, linger_ms=0,
                      batch_size=64, delivery_timeout_ms=15000) as p:
            futures = [p.send("r2", f"v{i}".encode()) for i in range(30)]
            got = [f.result(timeout=20) for f in futures]
        assert not {m.partition for m in got} & offline, (partitioner, got)
    with Producer(cluster.bootstrap, linger_ms=0, delivery_timeout_ms=15000) as p:
        p.partitions_for("r2")
        keys = [f"k{i}".encode() for i in range(40)]
        healthy = [k for k in keys if murmur2_partition(k, 3) not in offline]
        for k in healthy:
            assert p.send("r2", b"v", key=k).result(timeout=20).partition == \
                murmur2_partition(k, 3)
    stuck = next(k for k in keys if murmur2_partition(k, 3) in offline)
    with Producer(cluster.bootstrap, linger_ms=0, delivery_timeout_ms=2000,
                  request_timeout_ms=1500) as p:
        fut = p.send("r2", b"v", key=stuck)
        with pytest.raises(Exception, match=f"r2-{murmur2_partition(stuck, 3)}"):
            fut.result(timeout=20)


def test_admin_requests_to_the_controller_follow_a_killed_controller(
        cluster: Cluster) -> None:
    """`rebalance --partitions --execute` polls ListPartitionReassignments: when the
    controller is SIGKILLed meanwhile, the admin client asks again until the metadata names
    the new controller (the dead one's ZooKeeper session expires), instead of failing with
    "cannot connect"."""
    from kafkactl.client.admin import AdminClient

    with AdminClient(cluster.bootstrap) as admin:
        assert admin.list_partition_reassignments() == {}
        old = cluster.controller()
        cluster.brokers[old].kill()
        assert admin.list_partition_reassignments() == {}  # no error: retried
        new = admin.client.cluster.controller_id
    assert new != old and new in cluster.brokers


def test_topics_create_follows_a_killed_controller(cluster: Cluster) -> None:
    """`topics create` right after the controller is SIGKILLed (the metadata still names
    it until its ZooKeeper session expires): asked again of the new controller, as Java's
    admin client retries a disconnected call, instead of failing with "cannot connect"."""
    old = cluster.controller()
    cluster.brokers[old].kill()
    bootstrap = ",".join(b.bootstrap for b in cluster.live())
    r = subprocess.run([sys.executable, "-m", "kafkactl", "topics", "create", "-t", "after",
                        "--partitions", "2", "--replication-factor", "2", "-b", bootstrap],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert cluster.controller() not in (old, -1)
    assert set(cluster.wait_for_leaders("after", 2)) == {0, 1}
