"""`kafkactl mirror` throughput next to `kafkactl consume | kafkactl produce` piped between
the same two clusters in the same run, and source->target latency at a steady rate.

    python bench/mirror.py [RECORDS] [RATE] [SECONDS] [--rounds R] [--num-streams N ...]
                           [--baseline-tree DIR]
    (defaults 500000 10000 10, 3 rounds, --num-streams 1 auto)

Throughput: RECORDS records of 100 bytes in a 4-partition source topic, copied by each
tool into a fresh target topic. Two figures per tool: from launch to the last record in the
target (start-up included), and from the first record in the target to the last (steady
copying). Each round runs every tool once, alternately (the machine is shared and noisy);
the medians are printed. --baseline-tree runs the mirror of another checkout too (old code
next to new in the same run).
Latency: once the mirror owns every partition (its --json-status says so), records are
produced at RATE/s for SECONDS, each stamped with its send time; a consumer of the target
measures now - timestamp (the mirror keeps source timestamps).
Goals (issue 17): mirror >= 1.5x the pipe, >= 500k records/s, p99 <= 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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


def time_until(n: int, bootstrap: str, topic: str,
               proc: subprocess.Popen[bytes]) -> tuple[float, float]:
    """Seconds from now to the first record in the target topic, and to the n-th."""
    started = time.perf_counter()
    first = 0.0
    while True:
        got = records_in(bootstrap, topic)
        if got and not first:
            first = time.perf_counter() - started
        if got >= n:
            return first, time.perf_counter() - started
        if proc.poll() is not None and proc.returncode != 0:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        time.sleep(0.02)


def mirror_cmd(tree: Path, src: Broker, dst: Broker, *args: str) -> tuple[list[str],
                                                                          dict[str, str]]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    return [PY, "-m", "kafkactl", "mirror", "--source", src.bootstrap, "--target",
            dst.bootstrap, *args], env


def mirror_throughput(tree: Path, streams: str, src: Broker, dst: Broker, n: int,
                      tag: str, tmp: Path) -> tuple[float, float]:
    args = ["-t", "bench", "--rename", f"bench:bench-{tag}", "-q", "--group", f"bench-{tag}"]
    if streams != "1":  # the baseline tree may not know --num-streams as processes
        args += ["--num-streams", streams]
    cmd, env = mirror_cmd(tree, src, dst, *args)
    proc = subprocess.Popen(cmd, env=env, cwd=tree,
                            stderr=open(tmp / f"{tag}.log", "wb"))  # noqa: SIM115
    try:
        first, last = time_until(n, dst.bootstrap, f"bench-{tag}", proc)
        return n / last, n / max(1e-3, last - first)
    finally:
        proc.terminate()
        proc.wait(60)


def pipe_throughput(src: Broker, dst: Broker, n: int, tag: str) -> tuple[float, float]:
    topic = f"bench-{tag}"
    with AdminClient(dst.bootstrap) as admin:
        admin.create_topics({topic: (PARTITIONS, 1, {})})
    consume = subprocess.Popen(
        [PY, "-m", "kafkactl", "consume", "-b", src.bootstrap, "-t", "bench",
         "--from-beginning", "-e", "-q"], stdout=subprocess.PIPE)
    produce = subprocess.Popen(
        [PY, "-m", "kafkactl", "produce", "-b", dst.bootstrap, "-t", topic, "-q"],
        stdin=consume.stdout)
    assert consume.stdout is not None
    consume.stdout.close()
    try:
        first, last = time_until(n, dst.bootstrap, topic, produce)
        return n / last, n / max(1e-3, last - first)
    finally:
        produce.wait(600)
        consume.wait(60)


def owns_every_partition(status: Path) -> bool:
    try:
        st = json.loads(status.read_text())
    except (OSError, ValueError):
        return False
    return st.get("state") == "running" and sum(
        t.get("partitions", 0) for t in st.get("topics", {}).values()) == PARTITIONS


def latency(tree: Path, streams: str, src: Broker, dst: Broker, rate: int, seconds: float,
            tmp: Path, tag: str) -> list[float]:
    topic = f"lat-{tag}"
    with AdminClient(src.bootstrap) as admin:
        admin.create_topics({topic: (PARTITIONS, 1, {})})
        admin.client.ensure_topics([topic], allow_auto_create=False)
    status = tmp / f"{topic}-status.json"
    args = ["-t", topic, "-q", "--group", f"bench-{topic}", "--json-status", str(status),
            "--status-interval", "0.2"]
    if streams != "1":
        args += ["--num-streams", streams]
    cmd, env = mirror_cmd(tree, src, dst, *args)
    proc = subprocess.Popen(cmd, env=env, cwd=tree, stderr=open(tmp / f"{topic}.log", "wb"))  # noqa: SIM115
    lags: list[float] = []
    total = int(rate * seconds)
    try:
        deadline = time.monotonic() + 60
        while not owns_every_partition(status):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the mirror did not start; see {tmp / f'{topic}.log'}")
            time.sleep(0.05)
        with Consumer(topic, bootstrap_servers=dst.bootstrap, auto_offset_reset="earliest",
                      fetch_max_wait_ms=10) as c:
            def send() -> None:
                with Producer(src.bootstrap, linger_ms=1) as p:
                    t0 = time.perf_counter()
                    for i in range(total):
                        due = t0 + i / rate
                        while time.perf_counter() < due:
                            time.sleep(max(0.0, min(0.001, due - time.perf_counter())))
                        p.send(topic, b"y" * 100, timestamp_ms=int(time.time() * 1000))

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


def pct(lags: list[float], q: float) -> float:
    return lags[min(len(lags) - 1, int(q * len(lags)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", nargs="?", type=int, default=500_000)
    ap.add_argument("rate", nargs="?", type=int, default=10_000)
    ap.add_argument("seconds", nargs="?", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--num-streams", nargs="+", default=["1", "auto"])
    ap.add_argument("--baseline-tree", type=Path, default=None)
    opts = ap.parse_args()
    n = opts.records - opts.records % PARTITIONS
    tmp = Path(tempfile.mkdtemp(prefix="kafkactl-bench-mirror-"))
    src = start_broker("group.initial.rebalance.delay.ms=0")
    dst = start_broker("group.initial.rebalance.delay.ms=0")
    tools: list[tuple[str, Path | None, str]] = []
    if opts.baseline_tree is not None:
        tools.append((f"mirror ({opts.baseline_tree})", opts.baseline_tree.resolve(), "1"))
    tools += [(f"mirror --num-streams {s}", ROOT, s) for s in opts.num_streams]
    tools.append(("consume | produce (pipe)", None, ""))
    results: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in tools}
    try:
        fill(src.bootstrap, "bench", n)
        print(f"{n:,} records of 100 bytes, {PARTITIONS} partitions; source {src.bootstrap}, "
              f"target {dst.bootstrap}; {opts.rounds} rounds, medians "
              "(launch to last record / first to last record)", flush=True)
        for r in range(opts.rounds):
            for i, (name, tree, streams) in enumerate(tools):
                tag = f"{r}-{i}"
                got = (pipe_throughput(src, dst, n, tag) if tree is None else
                       mirror_throughput(tree, streams, src, dst, n, tag, tmp))
                results[name].append(got)
                print(f"  round {r}: {name:34s} {got[0]:12,.0f} / {got[1]:12,.0f} records/s",
                      flush=True)
        med = {name: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
               for name, v in results.items()}
        pipe = med["consume | produce (pipe)"]
        for name, (whole, steady) in med.items():
            print(f"  {name:34s} {whole:12,.0f} / {steady:12,.0f} records/s   "
                  f"ratio to the pipe {whole / pipe[0]:.2f}x / {steady / pipe[1]:.2f}x")
        print("  (goals: >= 1.5x the pipe and >= 500,000 records/s)")
        print(f"latency at {opts.rate:,} records/s for {opts.seconds:g} s once the mirror "
              f"owns every partition, {opts.rounds} rounds, medians (goal: p99 <= 100 ms)",
              flush=True)
        mirrors = [(name, tree, streams) for name, tree, streams in tools if tree is not None]
        figures: dict[str, list[tuple[float, float, float]]] = {m[0]: [] for m in mirrors}
        for r in range(opts.rounds):
            for i, (name, tree, streams) in enumerate(mirrors):
                assert tree is not None
                lags = latency(tree, streams, src, dst, opts.rate, opts.seconds, tmp,
                               f"{r}-{i}")
                if not lags:
                    print(f"  round {r}: {name:34s} no records arrived", flush=True)
                    continue
                got = (pct(lags, 0.5), pct(lags, 0.99), lags[-1])
                figures[name].append(got)
                print(f"  round {r}: {name:34s} p50 {got[0]:6.1f} ms  p99 {got[1]:6.1f} ms  "
                      f"max {got[2]:6.1f} ms  ({len(lags):,} records)", flush=True)
        for name, runs in figures.items():
            if runs:
                p50, p99, top = (statistics.median(x[k] for x in runs) for k in range(3))
                print(f"  {name:34s} p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  max {top:6.1f} ms")
    finally:
        src.stop()
        dst.stop()


if __name__ == "__main__":
    main()
