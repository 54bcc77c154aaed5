"""The fail-over part of bench/replication.py, phase by phase: SIGKILL of a partition's
leader (the controller too, or not) -> ZooKeeper expires its session (a watcher of the
bench's own sees /brokers/ids/N and /controller go) -> the controller acts (from the
survivors' logs) -> the survivors' Metadata names the new leader -> the first acks=all
write acknowledged by the successor. After each round the victim restarts, catches up,
and a preferred election gives every broker its leader back.

Two producers write to the victim's partition. confluent-kafka (librdkafka) re-queries the
metadata of a partition whose leader is down on a fixed one-second timer; and when the dead
broker leaves the broker list in the same Metadata response that names its successor,
librdkafka's main and broker threads race and the partition can fall back to "no leader"
(debug: "Reverting from preferred replica") until the next tick, one second more. kafkactl's
producer re-reads metadata 100 ms after a failed send, so its write shows when the cluster
itself can take acks=all writes again. A third writes to the partitions the victim only
followed (acks=all there waits until the dead replica leaves their ISR).
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.broker_common import Broker, start_broker
from kafkactl.protocol.api_keys import ApiKey
from tests.cluster.cluster_helpers import leaders, metadata, request
from tests.cluster.zk import ZooKeeperServer

SESSION_TIMEOUT_MS = 6000
TOPIC = "rf3"
CHROOT = "/bench"

# survivors' log lines -> phase (the first match after the kill counts); {v}: the victim,
# {p}: the partition
LOG_PHASES = [
    ("controller elected", r"won the controller election"),
    ("controller saw broker gone", r"brokers \[{v}\] left the cluster"),
    ("state loaded", r"loaded the cluster state"),
    ("leaders elected", r"changed leader or ISR|is the controller \(epoch"),
    ("successor leads", r"Partition\({t}-{p}\): leader at epoch"),
]
EXPIRED = "session expired (watcher)"
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ [\w.]+: (.*)$")


def create(port: int, name: str, partitions: int, rf: int) -> None:
    resp = request(port, ApiKey.CREATE_TOPICS, 5, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": rf,
        "assignments": [], "configs": [{"name": "min.insync.replicas",
                                        "value": "2" if rf > 1 else "1"}]}],
        "timeout_ms": 30000, "validate_only": False}, 60)
    assert resp["topics"][0]["error_code"] == 0, resp


def isr_full(port: int, topic: str, size: int) -> bool:
    md = metadata(port, [topic])
    parts = md["topics"][0]["partitions"] if md["topics"] else []
    return bool(parts) and all(len(p["isr_nodes"]) == size and p["leader_id"] >= 0
                               for p in parts)


def wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)


class BenchCluster:
    """Three brokers on one ZooKeeper (under `chroot`: one per cluster when a run starts
    several), each with its data dir and log file under `base` (so a killed broker
    restarts with its data). The brokers run the kafkactl on PYTHONPATH (bench/replication.py
    --kafkactl DIR sets it), else the installed one."""

    def __init__(self, zk: ZooKeeperServer, base: Path, *overrides: str,
                 chroot: str = CHROOT) -> None:
        self.zk = zk
        self.base = base
        self.overrides = overrides
        self.chroot = chroot
        self.brokers: dict[int, Broker] = {}

    def start(self, i: int) -> Broker:
        self.brokers[i] = start_broker(
            f"broker.id={i}", f"zookeeper.connect={self.zk.connect}{self.chroot}",
            f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}", *self.overrides,
            data_dir=self.base / f"broker-{i}", log_level="info", log_file=self.log(i))
        return self.brokers[i]

    def log(self, i: int) -> Path:
        return self.base / f"broker-{i}.log"

    def start_all(self) -> None:
        for i in (1, 2, 3):
            self.start(i)
        wait(lambda: all(len(metadata(b.port, [])["brokers"]) == 3
                         for b in self.brokers.values()), 60, "three brokers")

    def controller(self) -> int:
        return int(metadata(next(iter(self.live().values())).port, [])["controller_id"])

    def live(self) -> dict[int, Broker]:
        return {i: b for i, b in self.brokers.items() if b.proc.poll() is None}

    def stop(self) -> None:
        for b in self.brokers.values():
            b.stop()


class ZkObserver:
    """A ZooKeeper session of the bench's own: when each broker's registration goes, and
    when /controller goes and who holds it next (times from time.time())."""

    def __init__(self, connect: str) -> None:
        from kazoo.client import KazooClient
        from kazoo.recipe.watchers import ChildrenWatch, DataWatch

        self.zk = KazooClient(hosts=connect + CHROOT)
        self.zk.start(timeout=30)
        self.gone: dict[int, float] = {}
        self.controller_events: list[tuple[float, int]] = []  # (time, holder or -1)
        self._ids: set[int] = set()

        def on_ids(children: list[str]) -> None:
            now = time.time()
            ids = {int(c) for c in children if c.isdigit()}
            for b in self._ids - ids:
                self.gone[b] = now
            self._ids = ids

        def on_controller(data: bytes | None, _stat: Any) -> None:
            now = time.time()
            holder = -1
            if data:
                m = re.search(rb'"brokerid":(\d+)', data)
                holder = int(m.group(1)) if m else -1
            self.controller_events.append((now, holder))

        ChildrenWatch(self.zk, "/brokers/ids", on_ids)
        DataWatch(self.zk, "/controller", on_controller)

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


@dataclass
class FailoverRun:
    victim: int
    partition: int
    was_controller: bool
    acked: float = float("nan")  # seconds after the kill
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds after the kill


def _log_marks(path: Path, offset: int, since: float, victim: int,
               partition: int) -> dict[str, float]:
    patterns = [(name, re.compile(rx.format(v=victim, p=partition, t=TOPIC)))
                for name, rx in LOG_PHASES]
    out: dict[str, float] = {}
    with open(path, "rb") as f:
        f.seek(offset)
        for raw in f.read().decode(errors="replace").splitlines():
            m = LINE.match(raw)
            if m is None:
                continue
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            for name, rx in patterns:
                if name not in out and at >= since - 0.001 and rx.search(m.group(2)):
                    out[name] = at - since
    return out


def _watch_metadata(survivors: list[Broker], partition: int, victim: int,
                    stop: threading.Event, seen: dict[int, float]) -> None:
    """When each survivor's Metadata first names a live leader for the partition."""
    while not stop.is_set():
        for b in survivors:
            if b.port in seen:
                continue
            try:
                leader = leaders(b.port, TOPIC).get(partition, -1)
            except OSError:
                continue
            if leader not in (-1, victim):
                seen[b.port] = time.time()
        time.sleep(0.01)


def _write_others(bootstrap: str, partitions: list[int], stop: threading.Event,
                  acked: dict[int, float]) -> None:
    """acks=all writes to the partitions the victim only followed, until each is acked:
    they wait for the dead follower until it leaves their ISR."""
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "linger.ms": 0, "message.timeout.ms": 60000})

    def done(q: int) -> Any:
        return lambda err, _m: acked.setdefault(q, time.time()) if err is None else None

    while not stop.is_set() and len(acked) < len(partitions):
        for q in partitions:
            if q not in acked:
                p.produce(TOPIC, b"x", partition=q, on_delivery=done(q))
        p.flush(0.2)
    p.flush(1)


def _write_kafkactl(bootstrap: str, partition: int, stop: threading.Event,
                    acked: list[float]) -> None:
    """One acks=all write with kafkactl's own producer, which re-reads metadata 100 ms
    (retry.backoff.ms) after a failed send where librdkafka re-queries once a second."""
    from kafkactl.client.producer import Producer

    producer = Producer(bootstrap, acks="all", linger_ms=0, enable_idempotence=False,
                        client_id="bench-failover")
    try:
        fut = producer.send(TOPIC, b"x", partition=partition)
        while not stop.is_set() and not fut.done():
            time.sleep(0.005)
        if fut.done() and fut.exception() is None:
            acked.append(time.time())
    finally:
        producer.abort()


def failover_round(cluster: BenchCluster, observer: ZkObserver | None, victim: int,
                   partition: int, others: Sequence[int] = ()) -> FailoverRun:
    """SIGKILL `victim` (the leader of `partition`), time the phases up to the first
    acks=all write acknowledged by its successor (and, for `others`, partitions the victim
    followed, the first write acknowledged on each)."""
    import confluent_kafka

    run = FailoverRun(victim, partition, victim == cluster.controller())
    survivors = [b for i, b in cluster.live().items() if i != victim]
    ids = [i for i in cluster.live() if i != victim]
    offsets = {i: cluster.log(i).stat().st_size for i in ids}
    bootstrap = ",".join(b.bootstrap for b in survivors)
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "linger.ms": 0, "message.timeout.ms": 60000})
    stop = threading.Event()
    seen: dict[int, float] = {}
    others_acked: dict[int, float] = {}
    kafkactl_acked: list[float] = []
    threads = [threading.Thread(target=_watch_metadata,
                                args=(survivors, partition, victim, stop, seen)),
               threading.Thread(target=_write_kafkactl,
                                args=(bootstrap, partition, stop, kafkactl_acked))]
    if others:
        threads.append(threading.Thread(target=_write_others,
                                        args=(bootstrap, list(others), stop, others_acked)))
    acked: list[float] = []
    cluster.brokers[victim].proc.kill()
    killed, wall = time.perf_counter(), time.time()
    for t in threads:
        t.start()
    try:
        while not acked and time.perf_counter() - killed < 60:
            p.produce(TOPIC, b"x", partition=partition,
                      on_delivery=lambda err, _m: acked.append(time.perf_counter())
                      if err is None else None)
            p.flush(1)
        deadline = time.perf_counter() + 30
        while (len(others_acked) < len(others) or not kafkactl_acked) \
                and time.perf_counter() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    cluster.brokers[victim].proc.wait()
    if acked:
        run.acked = acked[0] - killed
    if observer is not None:
        if victim in observer.gone and observer.gone[victim] >= wall:
            run.phases[EXPIRED] = observer.gone[victim] - wall
        holders = [(t, h) for t, h in observer.controller_events if t >= wall and h >= 0]
        if run.was_controller and holders:
            run.phases["new /controller (watcher)"] = holders[0][0] - wall
    for i in ids:
        for name, at in _log_marks(cluster.log(i), offsets[i], wall, victim,
                                   partition).items():
            run.phases[name] = min(at, run.phases.get(name, at))
    if seen:
        run.phases["metadata names successor (first)"] = min(seen.values()) - wall
        if len(seen) == len(survivors):
            run.phases["metadata names successor (all)"] = max(seen.values()) - wall
    run.phases["acks=all write acked (confluent-kafka)"] = run.acked
    run.phases["acks=all write acked (kafkactl producer)"] = (
        kafkactl_acked[0] - wall if kafkactl_acked else float("inf"))
    if others:
        run.phases["acks=all on followed partitions"] = (
            max(others_acked.values()) - wall if len(others_acked) == len(others)
            else float("inf"))
    return run


def restore(cluster: BenchCluster, victim: int, partitions: int) -> None:
    """Restart `victim`, wait for full ISRs, and give leadership back to the preferred
    replicas (one partition per broker)."""
    cluster.start(victim)
    port = cluster.brokers[victim].port
    wait(lambda: isr_full(port, TOPIC, 3), 90, "the restarted broker back in every ISR")
    ctl = cluster.brokers[cluster.controller()]
    request(ctl.port, ApiKey.ELECT_LEADERS, 1, {
        "election_type": 0, "timeout_ms": 30000,
        "topic_partitions": [{"topic": TOPIC, "partitions": list(range(partitions))}]}, 60)
    want = {x["partition_index"]: x["replica_nodes"][0]
            for x in metadata(port, [TOPIC])["topics"][0]["partitions"]}
    wait(lambda: all(leaders(b.port, TOPIC) == want for b in cluster.live().values()), 60,
         "preferred leaders")


def pick_victim(cluster: BenchCluster, controller: bool) -> tuple[int, int, list[int]]:
    """(victim, partition it leads, partitions it follows): the controller, or a broker
    that is not."""
    ctl = cluster.controller()
    lead = leaders(cluster.brokers[ctl].port, TOPIC)
    for p, leader in sorted(lead.items()):
        if (leader == ctl) == controller:
            return leader, p, [q for q, other in sorted(lead.items()) if other != leader]
    raise SystemExit(f"no partition of {TOPIC} led by {'' if controller else 'a non-'}"
                     "controller broker")


def report(runs: list[FailoverRun]) -> None:
    for kind in (True, False):
        mine = [r for r in runs if r.was_controller == kind]
        if not mine:
            continue
        print(f"victim = leader{' and controller' if kind else ' only'} ({len(mine)} runs, "
              "seconds after SIGKILL: median [min - max]; median after the session "
              "expired)")
        names = sorted({n for r in mine for n in r.phases},
                       key=lambda n: statistics.median(
                           [r.phases[n] for r in mine if n in r.phases]))
        for name in names:
            xs = [r.phases[name] for r in mine if name in r.phases]
            after = [r.phases[name] - r.phases[EXPIRED] for r in mine
                     if name in r.phases and EXPIRED in r.phases]
            print(f"  {name:<42} {statistics.median(xs):6.2f}  [{min(xs):.2f} - "
                  f"{max(xs):.2f}]  ({len(xs)})" + (
                      f"  +{statistics.median(after):.3f}" if after else ""))
        print("  per run, confluent-kafka write acked: " + " ".join(
            f"{r.acked:.2f}" for r in mine))


def failover_only(zk: ZooKeeperServer, base: Path, rounds: int, load_partitions: int,
                  overrides: Sequence[str] = (), partitions: int = 3) -> None:
    """`rounds` fail-overs; `load_partitions` more partitions (RF=3, topic "load") give the
    controller a state to load as a cluster with some topics has."""
    cluster = BenchCluster(zk, base, "replica.fetch.backoff.ms=100",
                           "replica.lag.time.max.ms=10000", *overrides)
    observer = None
    try:
        cluster.start_all()
        observer = ZkObserver(zk.connect)
        ctl = cluster.brokers[cluster.controller()]
        create(ctl.port, TOPIC, partitions, 3)
        if load_partitions:
            create(ctl.port, "load", load_partitions, 3)
        wait(lambda: isr_full(ctl.port, TOPIC, 3) and (
            not load_partitions or isr_full(ctl.port, "load", 3)), 90, "topics")
        runs: list[FailoverRun] = []
        for n in range(rounds):
            victim, partition, others = pick_victim(cluster, controller=n % 2 == 0)
            run = failover_round(cluster, observer, victim, partition, others)
            print(f"round {n + 1}: broker {victim} (leader of {TOPIC}-{partition}"
                  f"{', controller' if run.was_controller else ''}) killed: write acked "
                  f"after {run.acked:.2f} s; " + ", ".join(
                      f"{k} {v:.2f}" for k, v in sorted(run.phases.items(),
                                                         key=lambda kv: kv[1])), flush=True)
            runs.append(run)
            restore(cluster, victim, partitions)
        report(runs)
    finally:
        if observer is not None:
            observer.close()
        cluster.stop()
