"""A three-broker ZooKeeper cluster on this machine, measured against one broker in the
same run:

1. CreateTopics of 1,000 partitions through the controller: time until every broker's
   Metadata shows all of them with a leader, and the p50/p99 latency of a steady
   single-record produce (acks=1, 200/s) running meanwhile (and before it, as baseline);
2. metadata propagation after a broker is SIGKILLed: time until every live broker reports
   its partitions with leader -1 (bounded by zookeeper.session.timeout.ms);
3. ingest with `kcat -P` into 12 partitions: the cluster vs a single broker (ratio).

Usage: python bench/cluster.py [--records N]   (needs Debian's zookeeper, java and kcat)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.broker_common import Broker, start_broker  # noqa: E402
from kafkactl.protocol.api_keys import ApiKey  # noqa: E402
from tests.cluster.cluster_helpers import leaders, metadata, request  # noqa: E402
from tests.cluster.zk import ZooKeeperServer, available  # noqa: E402

SESSION_TIMEOUT_MS = 6000


def wait(cond: object, timeout: float, what: str) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if cond():  # type: ignore[operator]
            return time.monotonic() - start
        time.sleep(0.01)
    raise SystemExit(f"timed out waiting for {what}")


def produce_latencies(port: int, topic: str, stop: threading.Event, out: list[float]) -> None:
    """One record per Produce request (acks=1), 200 per second, to partition 0's leader."""
    from kafkactl.record.builder import RecordBatchBuilder

    while not stop.is_set():
        b = RecordBatchBuilder()
        b.append(int(time.time() * 1000), None, b"x" * 100)
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": b.build()}]}]}
        t0 = time.perf_counter()
        request(port, ApiKey.PRODUCE, 9, body)
        out.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.005)


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 2 else float("nan")


def kcat_ingest(bootstrap: str, topic: str, payload: bytes) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", "linger.ms=5"],
                       input=payload, capture_output=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(r.stderr.decode())
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    args = ap.parse_args()
    if available() is not None or shutil.which("kcat") is None:
        raise SystemExit(f"needs ZooKeeper, java and kcat: {available()}")
    base = Path(tempfile.mkdtemp(prefix="kafkactl-cluster-bench-"))
    zk = ZooKeeperServer(base / "zk", jvm_options=())  # the JVM's defaults, not the tests'
    zk.start()
    brokers: dict[int, Broker] = {}
    single: Broker | None = None
    try:
        for i in (1, 2, 3):
            brokers[i] = start_broker(f"broker.id={i}", f"zookeeper.connect={zk.connect}/bench",
                                      f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
                                      "num.partitions=12")
        wait(lambda: all(len(metadata(b.port, [])["brokers"]) == 3 for b in brokers.values()),
             60, "three brokers")
        controller = metadata(brokers[1].port, [])["controller_id"]
        ctl = brokers[controller]

        # -- 1. a 1,000-partition CreateTopics under a steady produce -------------------------
        request(ctl.port, ApiKey.CREATE_TOPICS, 5, {"topics": [{"name": "probe",
                "num_partitions": 1, "replication_factor": 1, "assignments": [],
                "configs": []}], "timeout_ms": 30000, "validate_only": False})
        probe_leader = brokers[wait_leader(brokers, "probe")]
        before: list[float] = []
        during: list[float] = []
        stop = threading.Event()
        t = threading.Thread(target=produce_latencies,
                             args=(probe_leader.port, "probe", stop, before))
        t.start()
        time.sleep(3)
        stop.set()
        t.join()
        stop.clear()
        t = threading.Thread(target=produce_latencies,
                             args=(probe_leader.port, "probe", stop, during))
        t.start()
        t0 = time.monotonic()
        resp = request(ctl.port, ApiKey.CREATE_TOPICS, 5, {"topics": [{"name": "wide",
                       "num_partitions": 1000, "replication_factor": 1, "assignments": [],
                       "configs": []}], "timeout_ms": 60000, "validate_only": False}, 90)
        acked = time.monotonic() - t0
        wait(lambda: all(len(leaders(b.port, "wide")) == 1000 and
                         min(leaders(b.port, "wide").values()) >= 0
                         for b in brokers.values()), 120, "1000 partitions everywhere")
        visible = time.monotonic() - t0
        stop.set()
        t.join()
        print(f"CreateTopics 1000 partitions on 3 brokers: answered in {acked:.2f} s "
              f"(error {resp['topics'][0]['error_code']}), visible on every broker in "
              f"{visible:.2f} s")
        print(f"  produce latency before: p50 {pct(before, 50):.2f} ms, p99 "
              f"{pct(before, 99):.2f} ms ({len(before)} requests)")
        print(f"  produce latency during: p50 {pct(during, 50):.2f} ms, p99 "
              f"{pct(during, 99):.2f} ms, max {max(during):.1f} ms ({len(during)} requests)")

        # -- 3. ingest: the cluster vs one broker ----------------------------------------------
        payload = b"".join(b"%099d\n" % i for i in range(args.records))
        cluster_s = kcat_ingest(",".join(b.bootstrap for b in brokers.values()), "ingest",
                                payload)
        single = start_broker("num.partitions=12")
        single_s = kcat_ingest(single.bootstrap, "ingest", payload)
        print(f"kcat -P {args.records} x 100 B into 12 partitions: 3-broker cluster "
              f"{args.records / cluster_s:,.0f} rec/s, one broker "
              f"{args.records / single_s:,.0f} rec/s (ratio {single_s / cluster_s:.2f}; "
              "one machine: the brokers share its 2 cores)")

        # -- 2. a broker dies: every live broker reports its partitions offline -----------------
        victim_id = next(b for b in brokers if b != controller)
        led = {p for p, lead in leaders(ctl.port, "ingest").items() if lead == victim_id}
        brokers[victim_id].proc.kill()
        t0 = time.monotonic()
        live = [b for i, b in brokers.items() if i != victim_id]
        wait(lambda: all({p for p, lead in leaders(b.port, "ingest").items() if lead == -1}
                         == led for b in live), 60, "offline partitions")
        print(f"broker {victim_id} SIGKILLed: its {len(led)} partitions shown offline on every "
              f"live broker after {time.monotonic() - t0:.2f} s (session timeout "
              f"{SESSION_TIMEOUT_MS / 1000:.0f} s)")
    finally:
        for b in brokers.values():
            b.stop()
        if single is not None:
            single.stop()
        zk.stop()
        shutil.rmtree(base, ignore_errors=True)


def wait_leader(brokers: dict[int, Broker], topic: str) -> int:
    found: dict[int, int] = {}

    def ready() -> bool:
        found.update(leaders(brokers[1].port, topic))
        return bool(found) and found.get(0, -1) >= 0
    wait(ready, 30, f"a leader for {topic}")
    return found[0]


if __name__ == "__main__":
    main()
