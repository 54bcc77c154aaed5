"""What idle replicated partitions cost a busy one: incremental fetch sessions (KIP-227).

Two brokers in ZooKeeper mode; one hot partition (replication factor 2) written one record
at a time with acks=all (confluent-kafka, linger.ms=0, one in flight), beside an idle topic
of N partitions (replication factor 2, leaders on both brokers). Without fetch sessions
every follower fetch lists, and every leader reads and answers, all N partitions, for each
record; with sessions (the default) an incremental fetch lists only what changed and the
leader answers only partitions with news, settling an unchanged one in a few attribute
reads. Printed per N: the acks=all latency (p50, p90) and the brokers' CPU per record
(both brokers, user + system), and the ratios against N=0 measured in the same run, with
sessions on (default) and off (max.incremental.fetch.session.cache.slots=0).

Usage: python bench/replication_idle_partitions.py [--idle 100,1000] [--records 300]
[--port-base P] [--summary-json PATH]   (needs ZooKeeper, java, confluent-kafka).
`--port-base P` puts the brokers on ports P, P+1, ... (one pair per cluster) instead of
free ports.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.broker_common import Broker, free_port  # noqa: E402
from bench.summary import Row, add_summary_option, write_summary  # noqa: E402
from tests.cluster.zk import ZooKeeperServer, available  # noqa: E402

GOAL = "replication idle partitions"
OFF = ("max.incremental.fetch.session.cache.slots=0",)


@dataclass
class Result:
    idle: int
    sessions: bool
    p50_ms: float
    p90_ms: float
    cpu_ms: float  # both brokers' CPU per record


def _start(port: int, data: Path, overrides: list[str]) -> Broker:
    import socket

    args = [sys.executable, "-m", "kafkactl", "serve", "--data-dir", str(data),
            "--listen", f"127.0.0.1:{port}", "--log-level", "warning"]
    for o in overrides:
        args += ["--override", o]
    proc = subprocess.Popen(args, cwd=tempfile.gettempdir())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"broker exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return Broker(proc, port, data)
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("broker did not listen")


def _unused_from(port: int) -> int:
    """The first port from `port` on that nothing listens on (--port-base)."""
    import socket

    while True:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                port += 1


def measure(zk: ZooKeeperServer, base: Path, idle: int, sessions: bool, records: int,
            ports: tuple[int, int]) -> Result:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    chroot = f"/idle-{idle}-{int(sessions)}"
    brokers = []
    try:
        for i, port in zip((1, 2), ports, strict=True):
            data = base / f"{chroot[1:]}-b{i}"
            data.mkdir()
            overrides = [f"broker.id={i}", f"zookeeper.connect={zk.connect}{chroot}",
                         "default.replication.factor=2", *(() if sessions else OFF)]
            brokers.append(_start(port, data, overrides))
        bootstrap = ",".join(b.bootstrap for b in brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + 60
        while len(admin.list_topics(timeout=10).brokers) < 2:
            if time.monotonic() > deadline:
                raise SystemExit("the brokers did not register")
            time.sleep(0.2)
        topics = [NewTopic("hot", 1, 2)] + ([NewTopic("idle", idle, 2)] if idle else [])
        for f in admin.create_topics(topics).values():
            f.result(120)
        names = ("hot", "idle") if idle else ("hot",)

        def in_sync() -> bool:
            md = admin.list_topics(timeout=10).topics
            return all(t in md and md[t].partitions and all(
                len(p.isrs) == 2 for p in md[t].partitions.values()) for t in names)

        deadline = time.monotonic() + 240
        while not in_sync():
            if time.monotonic() > deadline:
                raise SystemExit("the partitions did not get in sync")
            time.sleep(0.5)
        time.sleep(2)  # the creation's own work (LeaderAndIsr, first fetches) settles
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                             "max.in.flight": 1})
        for _ in range(20):  # warm-up: connections, metadata
            producer.produce("hot", b"w" * 100, partition=0)
            producer.flush(30)
        lat = []
        cpu0 = sum(b.cpu_seconds() for b in brokers)
        for _ in range(records):
            t = time.perf_counter()
            producer.produce("hot", b"x" * 100, partition=0)
            producer.flush(30)
            lat.append(time.perf_counter() - t)
        cpu = sum(b.cpu_seconds() for b in brokers) - cpu0
        lat.sort()
        return Result(idle, sessions, statistics.median(lat) * 1e3,
                      lat[int(len(lat) * 0.9)] * 1e3, cpu / records * 1e3)
    finally:
        for b in brokers:
            b.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--idle", default="100,1000",
                    help="idle partition counts to compare with 0 (comma-separated)")
    ap.add_argument("--records", type=int, default=300)
    ap.add_argument("--port-base", type=int, default=0)
    add_summary_option(ap)
    args = ap.parse_args()
    missing = available()
    if missing:
        raise SystemExit(f"needs ZooKeeper: {missing}")
    counts = [0, *(int(n) for n in args.idle.split(","))]
    base = Path(tempfile.mkdtemp(prefix="kafkactl-bench-idle-"))
    zk = ZooKeeperServer(base / "zk", jvm_options=())
    zk.start()
    results: dict[tuple[int, bool], Result] = {}
    next_port = args.port_base
    try:
        for idle in counts:
            for sessions in (True, False):
                if next_port:
                    first = _unused_from(next_port)
                    second = _unused_from(first + 1)
                    ports = (first, second)
                    next_port = second + 1
                else:
                    ports = (free_port(), free_port())
                r = measure(zk, base, idle, sessions, args.records, ports)
                results[(idle, sessions)] = r
                print(f"idle {idle:5d}  sessions {'on ' if sessions else 'off'}: acks=all "
                      f"p50 {r.p50_ms:6.2f} ms  p90 {r.p90_ms:6.2f} ms  "
                      f"broker CPU {r.cpu_ms:6.2f} ms/record", flush=True)
    finally:
        zk.stop()
        shutil.rmtree(base, ignore_errors=True)
    rows = []
    print()
    print("idle  sessions  p50 vs 0 idle  CPU vs 0 idle  | sessions off / on: p50  CPU")
    for idle in counts:
        on, off = results[(idle, True)], results[(idle, False)]
        base_on, base_off = results[(0, True)], results[(0, False)]
        print(f"{idle:5d}  on        {on.p50_ms / base_on.p50_ms:6.2f}x       "
              f"{on.cpu_ms / base_on.cpu_ms:6.2f}x       |")
        print(f"{idle:5d}  off       {off.p50_ms / base_off.p50_ms:6.2f}x       "
              f"{off.cpu_ms / base_off.cpu_ms:6.2f}x       | "
              f"{off.p50_ms / on.p50_ms:6.2f}x  {off.cpu_ms / on.cpu_ms:6.2f}x")
        if idle:
            rows.append(Row(GOAL, f"acks=all p50 with {idle} idle partitions, sessions on",
                            on.p50_ms, "ms", "0 idle partitions, sessions on", base_on.p50_ms,
                            on.p50_ms / base_on.p50_ms))
            rows.append(Row(GOAL, f"broker CPU per record with {idle} idle partitions, "
                            "sessions on", on.cpu_ms, "ms", "0 idle partitions, sessions on",
                            base_on.cpu_ms, on.cpu_ms / base_on.cpu_ms))
            rows.append(Row(GOAL, f"acks=all p50 with {idle} idle partitions, sessions off",
                            off.p50_ms, "ms", f"{idle} idle partitions, sessions on",
                            on.p50_ms, off.p50_ms / on.p50_ms))
            rows.append(Row(GOAL, f"broker CPU per record with {idle} idle partitions, "
                            "sessions off", off.cpu_ms, "ms",
                            f"{idle} idle partitions, sessions on", on.cpu_ms,
                            off.cpu_ms / on.cpu_ms))
    write_summary(args.summary_json, rows)


if __name__ == "__main__":
    main()
