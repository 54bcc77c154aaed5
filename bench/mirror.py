"""`kafkactl mirror` throughput next to `kafkactl consume | kafkactl produce` piped between
the same two clusters in the same run, and source->target latency at a steady rate.

    python bench/mirror.py [RECORDS] [RATE] [SECONDS]     (defaults 500000 10000 10)

Throughput: RECORDS records of 100 bytes in a 4-partition source topic, copied by each
tool into a fresh target topic, timed from launch to the last record in the target.
Latency: records produced at RATE/s for SECONDS, each stamped with its send time; a
consumer of the target measures now - timestamp (the mirror keeps source timestamps).
Goals (issue 17): mirror >= 1.5x the pipe, >= 500k records/s, p99 <= 100 ms.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.broker_common import Broker, start_broker  # noqa: E402
from kafkactl.client.admin import AdminClient  # noqa: E402
from kafkactl.client.consumer import Consumer  # noqa: E402
from kafkactl.client.producer import Producer  # noqa: E402

PY = sys.executable
PARTITIONS = 4


def records_in(bootstrap: str, topic: str) -> int:
    with Consumer(bootstrap_servers=bootstrap) as c:
        try:
            tps = [(topic, p) for p in c.simple.partitions_for(topic)]
        except Exception:
            return 0
        return sum(c.end_offsets(tps).values())


def fill(bootstrap: str, topic: str, n: int) -> None:
    with AdminClient(bootstrap) as admin:
        admin.create_topics({topic: (PARTITIONS, 1, {})})
        admin.client.ensure_topics([topic], allow_auto_create=False)
    value = b"x" * 100
    with Producer(bootstrap, batch_size=262144, linger_ms=20) as p:
        per = n // PARTITIONS
        for part in range(PARTITIONS):
            for start in range(0, per, 10000):
                p.send_values(topic, [value] * min(10000, per - start), partition=part)
        p.flush()


def time_until(n: int, bootstrap: str, topic: str, proc: subprocess.Popen[bytes]) -> float:
    started = time.perf_counter()
    while records_in(bootstrap, topic) < n:
        if proc.poll() is not None and proc.returncode != 0:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        time.sleep(0.05)
    return time.perf_counter() - started


def mirror_throughput(src: Broker, dst: Broker, n: int, tmp: Path) -> float:
    proc = subprocess.Popen(
        [PY, "-m", "kafkactl", "mirror", "--source", src.bootstrap, "--target",
         dst.bootstrap, "-t", "bench", "--rename", "bench:bench-mirror", "-q",
         "--group", "bench-mirror"], stderr=open(tmp / "mirror.log", "wb"))  # noqa: SIM115
    try:
        return n / time_until(n, dst.bootstrap, "bench-mirror", proc)
    finally:
        proc.terminate()
        proc.wait(60)


def pipe_throughput(src: Broker, dst: Broker, n: int) -> float:
    with AdminClient(dst.bootstrap) as admin:
        admin.create_topics({"bench-pipe": (PARTITIONS, 1, {})})
    consume = subprocess.Popen(
        [PY, "-m", "kafkactl", "consume", "-b", src.bootstrap, "-t", "bench",
         "--from-beginning", "-e", "-q"], stdout=subprocess.PIPE)
    produce = subprocess.Popen(
        [PY, "-m", "kafkactl", "produce", "-b", dst.bootstrap, "-t", "bench-pipe", "-q"],
        stdin=consume.stdout)
    assert consume.stdout is not None
    consume.stdout.close()
    try:
        return n / time_until(n, dst.bootstrap, "bench-pipe", produce)
    finally:
        produce.wait(600)
        consume.wait(60)


def latency(src: Broker, dst: Broker, rate: int, seconds: float, tmp: Path) -> list[float]:
    with AdminClient(src.bootstrap) as admin:
        admin.create_topics({"lat": (PARTITIONS, 1, {})})
        admin.client.ensure_topics(["lat"], allow_auto_create=False)
    status = tmp / "lat-status.json"
    proc = subprocess.Popen(
        [PY, "-m", "kafkactl", "mirror", "--source", src.bootstrap, "--target",
         dst.bootstrap, "-t", "lat", "-q", "--group", "bench-lat", "--json-status",
         str(status), "--status-interval", "0.2"],
        stderr=open(tmp / "lat-mirror.log", "wb"))  # noqa: SIM115
    lags: list[float] = []
    total = int(rate * seconds)
    try:
        while not status.exists() or json.loads(status.read_text() or "{}").get(
                "state") != "running" or records_in(dst.bootstrap, "lat") < 0:
            time.sleep(0.05)
        with Consumer("lat", bootstrap_servers=dst.bootstrap, auto_offset_reset="earliest",
                      fetch_max_wait_ms=10) as c:
            def send() -> None:
                with Producer(src.bootstrap, linger_ms=1) as p:
                    t0 = time.perf_counter()
                    for i in range(total):
                        due = t0 + i / rate
                        while time.perf_counter() < due:
                            time.sleep(max(0.0, min(0.001, due - time.perf_counter())))
                        p.send("lat", b"y" * 100, timestamp_ms=int(time.time() * 1000))

            sender = threading.Thread(target=send)
            sender.start()
            deadline = time.monotonic() + seconds + 60
            while len(lags) < total and time.monotonic() < deadline:
                for recs in c.poll(100).values():
                    now = time.time() * 1000
                    lags.extend(now - r.timestamp for r in recs)
            sender.join()
    finally:
        proc.terminate()
        proc.wait(60)
    return sorted(lags)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
    rate = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
    n -= n % PARTITIONS
    tmp = Path(tempfile.mkdtemp(prefix="kafkactl-bench-mirror-"))
    src = start_broker("group.initial.rebalance.delay.ms=0")
    dst = start_broker("group.initial.rebalance.delay.ms=0")
    try:
        fill(src.bootstrap, "bench", n)
        print(f"{n:,} records of 100 bytes, {PARTITIONS} partitions; "
              f"source {src.bootstrap}, target {dst.bootstrap}")
        m = mirror_throughput(src, dst, n, tmp)
        print(f"  kafkactl mirror               {m:12,.0f} records/s", flush=True)
        p = pipe_throughput(src, dst, n)
        print(f"  consume | produce (pipe)      {p:12,.0f} records/s", flush=True)
        print(f"  ratio mirror/pipe = {m / p:.2f}x   (goals: >= 1.5x and >= 500,000 rec/s)")
        lags = latency(src, dst, rate, seconds, tmp)
        if lags:
            def pct(q: float) -> float:
                return lags[min(len(lags) - 1, int(q * len(lags)))]
            print(f"latency at {rate:,} records/s for {seconds:g} s ({len(lags):,} records): "
                  f"p50 {pct(0.5):.1f} ms  p99 {pct(0.99):.1f} ms  max {lags[-1]:.1f} ms "
                  "(goal: p99 <= 100 ms)")
        else:
            print("latency: no records arrived")
    finally:
        src.stop()
        dst.stop()


if __name__ == "__main__":
    main()
