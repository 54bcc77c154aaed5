"""Replicated partitions on three real brokers: followers copy the leader byte for byte,
acks=all waits for the in-sync replicas, min.insync.replicas refuses writes it cannot
protect, a dead leader is replaced from the ISR with no acknowledged record lost, and a
follower that stalls leaves the ISR and comes back."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests import zygote
from tests.cluster.cluster_helpers import (
    SESSION_TIMEOUT_MS,
    Cluster,
    leaders,
    metadata,
    request,
    start_cluster,
)
from tests.polling import wait_until

LAG_MS = 3000
OVERRIDES = {"replica_lag_time_max_ms": str(LAG_MS), "replica_fetch_backoff_ms": "100",
             "default_replication_factor": "3", "offsets_topic_replication_factor": "3"}


@pytest.fixture
def cluster(broker_factory, zookeeper):  # type: ignore[no-untyped-def]
    return start_cluster(broker_factory, zookeeper, **OVERRIDES)


def create(cluster: Cluster, name: str, partitions: int, rf: int = 3,
           configs: tuple[str, ...] = ()) -> None:
    args = ["topics", "create", "-b", cluster.bootstrap, "-t", name,
            "--partitions", str(partitions), "--replication-factor", str(rf)]
    for c in configs:
        args += ["--config", c]
    r = zygote.run(args, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def partition_state(cluster: Cluster, topic: str) -> dict[int, dict[str, object]]:
    """partition -> {leader, isr, replicas} as the first live broker reports it."""
    md = metadata(cluster.live()[0].port, [topic])
    out = {}
    for t in md["topics"]:
        for p in t["partitions"]:
            out[p["partition_index"]] = {"leader": p["leader_id"], "isr": sorted(p["isr_nodes"]),
                                         "replicas": sorted(p["replica_nodes"])}
    return out


def full_isr(cluster: Cluster, topic: str, partitions: int, size: int = 3,
             timeout: float = 40) -> dict[int, dict[str, object]]:
    def ok() -> dict[int, dict[str, object]] | None:
        st = partition_state(cluster, topic)
        good = len(st) == partitions and all(
            s["leader"] >= 0 and len(s["isr"]) == size for s in st.values())  # type: ignore[arg-type, operator]
        return st if good else None
    return wait_until(ok, timeout, f"{topic}: every partition with {size} in-sync replicas")


def produce_acks_all(bootstrap: str, topic: str,
                     lines: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", "acks=all",
                           "-X", "enable.idempotence=true"],
                          input="".join(f"{v}\n" for v in lines), capture_output=True,
                          text=True, timeout=120)


def consume_all(bootstrap: str, topic: str) -> list[str]:
    r = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-q"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def log_bytes(data_dir: Path, topic: str, partition: int) -> bytes:
    """The partition's batches (all segments, in order) as stored on one broker."""
    d = data_dir / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def test_followers_copy_the_leader_and_acks_all_waits_for_them(cluster) -> None:
    create(cluster, "rep", 3)
    st = full_isr(cluster, "rep", 3)
    assert all(s["replicas"] == [1, 2, 3] for s in st.values())
    lines = [f"r{i}" for i in range(2000)]
    r = produce_acks_all(cluster.bootstrap, "rep", lines)
    assert r.returncode == 0, r.stderr
    assert sorted(consume_all(cluster.bootstrap, "rep")) == sorted(lines)
    # every replica holds the same bytes (flushed by the leader's fetch loop): compare
    # once the followers caught up
    def identical() -> bool:
        return all(len({log_bytes(b.data_dir, "rep", p) for b in cluster.brokers.values()})
                   == 1 for p in range(3))
    wait_until(identical, 30, "byte-identical replicas")
    r = zygote.run(["cluster", "verify-replicas", "-t", "rep", "--json",
                    "-b", cluster.bootstrap], text=True, timeout=60)
    assert r.returncode == 0, r.stderr + r.stdout
    import json

    rows = json.loads(r.stdout)
    assert len(rows) == 3 and all(row["diverged_at"] is None for row in rows)
    assert sum(row["checked_up_to"] for row in rows) == len(lines)


def test_min_insync_replicas_refuses_writes_it_cannot_protect(cluster) -> None:
    create(cluster, "guarded", 1, configs=("min.insync.replicas=3",))
    st = full_isr(cluster, "guarded", 1)
    leader = st[0]["leader"]
    victim = next(b for b in (1, 2, 3) if b != leader and b != cluster.controller())
    cluster.brokers[victim].kill()
    wait_until(lambda: len(partition_state(cluster, "guarded")[0]["isr"]) == 2,  # type: ignore[arg-type]
               SESSION_TIMEOUT_MS / 1000 + 20, "the ISR to shrink")
    from kafkactl.record.builder import RecordBatchBuilder

    b = RecordBatchBuilder()
    b.append(int(time.time() * 1000), None, b"x")
    port = cluster.brokers[leader].port  # type: ignore[index]
    resp = request(port, ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": "guarded", "partition_data": [
            {"index": 0, "records": b.build()}]}]})
    # refused before the append when the leader knows the ISR shrank; appended but not
    # acknowledged when it learns it while the write waits for the ISR (its LeaderAndIsr
    # can arrive after the Metadata the wait above saw): never acknowledged with 2 copies
    assert resp["responses"][0]["partition_responses"][0]["error_code"] in (
        ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    cluster.brokers[victim].start()
    full_isr(cluster, "guarded", 1)
    r = produce_acks_all(cluster.bootstrap, "guarded", ["back"])
    assert r.returncode == 0, r.stderr


def test_leader_killed_repeatedly_loses_no_acknowledged_record(cluster) -> None:
    create(cluster, "durable", 1, configs=("min.insync.replicas=2",))
    full_isr(cluster, "durable", 1)
    acked: list[str] = []
    for round_ in range(4):
        batch = [f"k{round_}-{i}" for i in range(300)]
        r = produce_acks_all(cluster.bootstrap, "durable", batch)
        assert r.returncode == 0, r.stderr
        acked += batch
        leader = leaders(cluster.live()[0].port, "durable")[0]
        cluster.brokers[leader].kill()
        wait_until(lambda leader=leader: leaders(cluster.live()[0].port, "durable").get(0)
                   not in (None, -1, leader), SESSION_TIMEOUT_MS / 1000 + 20,
                   "a new leader from the ISR")
        cluster.brokers[leader].start()
        full_isr(cluster, "durable", 1, timeout=60)
    got = consume_all(cluster.bootstrap, "durable")
    assert got == acked  # every acknowledged record, once, in order


def test_a_stalled_follower_leaves_the_isr_and_rejoins(cluster) -> None:
    create(cluster, "lagging", 1)
    st = full_isr(cluster, "lagging", 1)
    leader = st[0]["leader"]
    victim = next(b for b in (1, 2, 3) if b != leader and b != cluster.controller())
    proc = cluster.brokers[victim].proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    try:
        r = produce_acks_all(cluster.bootstrap, "lagging", [f"s{i}" for i in range(100)])
        assert r.returncode == 0, r.stderr
        wait_until(lambda: victim not in partition_state(cluster, "lagging")[0]["isr"],  # type: ignore[operator]
                   LAG_MS / 1000 + SESSION_TIMEOUT_MS / 1000 + 20, "the follower to leave")
    finally:
        proc.send_signal(signal.SIGCONT)
    full_isr(cluster, "lagging", 1, timeout=60)


def test_two_of_three_brokers_down_writes_fail_reads_work_then_recover(cluster) -> None:
    create(cluster, "quorum", 1, configs=("min.insync.replicas=2",))
    full_isr(cluster, "quorum", 1)
    r = produce_acks_all(cluster.bootstrap, "quorum", [f"q{i}" for i in range(100)])
    assert r.returncode == 0, r.stderr
    survivor = cluster.controller()
    for bid, b in cluster.brokers.items():
        if bid != survivor:
            b.kill()
    wait_until(lambda: partition_state(cluster, "quorum")[0]["isr"] == [survivor]
               and partition_state(cluster, "quorum")[0]["leader"] == survivor,
               SESSION_TIMEOUT_MS / 1000 + 20, "the survivor alone in the ISR, leading")
    # a write is refused at once with the reason (not left hanging)
    from kafkactl.record.builder import RecordBatchBuilder

    b = RecordBatchBuilder()
    b.append(int(time.time() * 1000), None, b"x")
    t0 = time.monotonic()
    resp = request(cluster.brokers[survivor].port, ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout_ms": 30000,
        "topic_data": [{"name": "quorum", "partition_data": [
            {"index": 0, "records": b.build()}]}]})
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == \
        ErrorCode.NOT_ENOUGH_REPLICAS
    assert time.monotonic() - t0 < 5
    # committed data is still served
    assert consume_all(cluster.brokers[survivor].bootstrap, "quorum") == \
        [f"q{i}" for i in range(100)]
    for bid, broker in cluster.brokers.items():
        if bid != survivor:
            broker.start()
    full_isr(cluster, "quorum", 1, timeout=60)
    r = produce_acks_all(cluster.bootstrap, "quorum", ["after"])
    assert r.returncode == 0, r.stderr
    assert consume_all(cluster.bootstrap, "quorum")[-1] == "after"


def test_continuous_idempotent_writes_survive_ten_leader_kills(cluster) -> None:
    """An idempotent acks=all producer writes all along while the partition's leader is
    SIGKILLed (and restarted) ten times: every acknowledged record is there exactly once,
    in order, and the replicas are byte-identical."""
    import threading

    confluent_kafka = pytest.importorskip("confluent_kafka")
    create(cluster, "storm", 1, configs=("min.insync.replicas=2",))
    full_isr(cluster, "storm", 1)
    acked: list[int] = []
    failed: list[int] = []
    stop = threading.Event()

    def produce() -> None:
        p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap,
                                      "enable.idempotence": True, "acks": "all",
                                      "linger.ms": 5, "message.timeout.ms": 120000})

        def done(err, msg) -> None:  # type: ignore[no-untyped-def]
            (failed if err is not None else acked).append(int(msg.value()))
        n = 0
        while not stop.is_set():
            try:
                p.produce("storm", str(n).encode(), on_delivery=done)
                n += 1
            except BufferError:
                p.poll(0.05)
            p.poll(0)
            if n % 50 == 0:
                time.sleep(0.01)
        p.flush(120)

    t = threading.Thread(target=produce)
    t.start()
    try:
        for _ in range(10):
            before = len(acked)
            wait_until(lambda before=before: len(acked) > before + 100, 60,
                       "acknowledged records before the kill")
            leader = leaders(cluster.live()[0].port, "storm")[0]
            cluster.brokers[leader].kill()
            wait_until(lambda leader=leader: leaders(cluster.live()[0].port, "storm").get(0)
                       not in (None, -1, leader), SESSION_TIMEOUT_MS / 1000 + 20,
                       "a new leader")
            cluster.brokers[leader].start()
            full_isr(cluster, "storm", 1, timeout=60)
    finally:
        stop.set()
        t.join(180)
    assert not failed
    got = [int(v) for v in consume_all(cluster.bootstrap, "storm")]
    assert got == sorted(got) and len(got) == len(set(got))  # in order, no duplicate
    assert set(acked) <= set(got)  # nothing acknowledged is missing
    wait_until(lambda: len({log_bytes(b.data_dir, "storm", 0)
                            for b in cluster.brokers.values()}) == 1, 30,
               "byte-identical replicas")


def test_partitions_move_to_new_brokers_and_leaders_return_to_preferred(cluster) -> None:
    """Three partitions all on broker 1 are spread over the three brokers with
    `rebalance --partitions --execute` (data copied by the new followers first, broker 1's
    copies dropped after); then a preferred leader displaced by a restart gets its
    partition back with `rebalance --preferred-leaders`."""
    controller = cluster.brokers[cluster.controller()]
    resp = request(controller.port, ApiKey.CREATE_TOPICS, 5, {"topics": [{
        "name": "moving", "num_partitions": -1, "replication_factor": -1, "configs": [],
        "assignments": [{"partition_index": p, "broker_ids": [1]} for p in range(3)]}],
        "timeout_ms": 30000, "validate_only": False})
    assert resp["topics"][0]["error_code"] == 0, resp
    full_isr(cluster, "moving", 3, size=1)
    lines = [f"m{i}" for i in range(600)]
    r = produce_acks_all(cluster.bootstrap, "moving", lines)
    assert r.returncode == 0, r.stderr
    dry = zygote.run(["rebalance", "--partitions", "-t", "moving", "--json",
                      "-b", cluster.bootstrap], text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    import json

    moves = json.loads(dry.stdout)["moves"]
    assert moves and not json.loads(dry.stdout)["executed"]
    done = zygote.run(["rebalance", "--partitions", "-t", "moving", "--execute",
                       "-b", cluster.bootstrap], text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    st = full_isr(cluster, "moving", 3, size=1)
    assert sorted(s["replicas"][0] for s in st.values()) == [1, 2, 3]  # type: ignore[index]
    assert sorted(consume_all(cluster.bootstrap, "moving")) == sorted(lines)
    moved_away = [p for p, s in st.items() if s["replicas"] != [1]]
    wait_until(lambda: all(not (cluster.brokers[1].data_dir / f"moving-{p}").exists()
                           for p in moved_away), 30, "broker 1's moved copies to go")

    create(cluster, "prefer", 1)
    st = full_isr(cluster, "prefer", 1)
    preferred = st[0]["leader"]
    cluster.brokers[preferred].kill()  # type: ignore[index]
    wait_until(lambda: partition_state(cluster, "prefer")[0]["leader"] not in (-1, preferred),
               SESSION_TIMEOUT_MS / 1000 + 20, "another leader")
    cluster.brokers[preferred].start()  # type: ignore[index]
    full_isr(cluster, "prefer", 1, timeout=60)
    displaced = partition_state(cluster, "prefer")[0]["leader"]
    assert displaced != preferred
    dry = zygote.run(["rebalance", "--preferred-leaders", "--dry-run", "-t", "prefer",
                      "-b", cluster.bootstrap], text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "1 partition(s) would move" in dry.stdout, dry.stdout
    assert f"prefer-0: would move: leader {displaced} -> {preferred}" in dry.stdout
    assert partition_state(cluster, "prefer")[0]["leader"] == displaced  # nothing elected
    r = zygote.run(["rebalance", "--preferred-leaders", "-t", "prefer",
                    "-b", cluster.bootstrap], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "1 partition(s) moved" in r.stdout
    wait_until(lambda: partition_state(cluster, "prefer")[0]["leader"] == preferred, 20,
               "the preferred leader back")


def test_group_offsets_survive_the_coordinator_dying(cluster) -> None:
    """__consumer_offsets is replicated (offsets.topic.replication.factor=3): when the
    group coordinator's broker dies, the new leader of its offsets partition loads the
    group and the members resume from the committed offsets."""
    create(cluster, "work", 1)
    full_isr(cluster, "work", 1)
    r = produce_acks_all(cluster.bootstrap, "work", [f"w{i}" for i in range(100)])
    assert r.returncode == 0, r.stderr
    first = zygote.run(["consume", "-b", cluster.bootstrap, "-t", "work",
                        "-G", "crew", "-c", "40", "-o", "earliest"], text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == [f"w{i}" for i in range(40)]
    found = request(cluster.live()[0].port, ApiKey.FIND_COORDINATOR, 3,
                    {"key": "crew", "key_type": 0})
    coordinator = found["node_id"]
    assert coordinator in cluster.brokers
    cluster.brokers[coordinator].kill()
    wait_until(lambda: request(cluster.live()[0].port, ApiKey.FIND_COORDINATOR, 3,
                               {"key": "crew", "key_type": 0})["node_id"]
               not in (-1, coordinator), SESSION_TIMEOUT_MS / 1000 + 20,
               "another coordinator")
    rest = zygote.run(["consume", "-b", cluster.bootstrap, "-t", "work",
                       "-G", "crew", "-e"], text=True, timeout=120)
    assert rest.returncode == 0, rest.stderr
    assert rest.stdout.split() == [f"w{i}" for i in range(40, 100)]


def test_controller_and_leader_die_together_and_the_election_completes(cluster) -> None:
    create(cluster, "both", 3)
    st = full_isr(cluster, "both", 3)
    controller = cluster.controller()
    led_by_other = {p: s["leader"] for p, s in st.items() if s["leader"] != controller}
    victim = next(iter(led_by_other.values()), None)
    cluster.brokers[controller].kill()
    if victim is not None:
        cluster.brokers[victim].kill()  # type: ignore[index]
    survivor = next(b for b in cluster.brokers if b not in (controller, victim))
    wait_until(lambda: all(s["leader"] == survivor
                           for s in partition_state(cluster, "both").values()),
               SESSION_TIMEOUT_MS / 1000 + 20, "the survivor leading every partition")
    r = subprocess.run(["kcat", "-C", "-b", cluster.brokers[survivor].bootstrap, "-t", "both",
                        "-e", "-q"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
