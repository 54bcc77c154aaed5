"""Many partitions on one broker (issue 20, goal 3).

Phases, in one run:
- create  `--topics` topics of `--partitions` partitions each (10,000 by default), by
          CreateTopics of 10 topics at a time; then RSS and open files per partition;
- metadata  Metadata for every topic (v9, null topic list), `--metadata-rounds` times:
          round-trip p50/max (response read, not decoded: that is the client's cost);
- restart a clean stop (SIGTERM) and a new start on the same data: time until the broker
          answers Metadata, against an empty broker's;
- stall   `--producers` processes produce one record per request (acks=1, one request in
          flight, paced to `--rate` requests/s each); their p99 before, and while one
          CreateTopics of `--big` partitions runs, is the figure; then the same while
          a DeleteTopics of that topic runs.

Baselines: the empty broker (RSS, fds, start-up) and the producers' p99 before the
CreateTopics. Needs about 1 open file per partition (`ulimit -n` at least partitions + a
few hundred); the broker raises its soft limit to the hard one and says so when that is
still too low.

    python bench/many_partitions.py [--topics 100] [--partitions 100] [--big 6000]
                                    [--producers 3] [--summary-json PATH]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_rows import (
    call,
    connect,
    create_topics_body,
    open_fds,
    percentile,
    print_rows,
    recv_frame,
    row,
    rss_bytes,
    write_summary,
)
from broker_common import Broker, start_broker

GOAL = "3 partitions"
PROBE = "probe"
CREATE_TOPICS_VERSION = 5
METADATA_VERSION = 9
PRODUCE_VERSION = 9


def produce_frame(partition: int) -> bytes:
    from kafkactl.protocol.api_keys import ApiKey
    from kafkactl.protocol.codec import encode_request
    from kafkactl.record.builder import RecordBatchBuilder

    b = RecordBatchBuilder()
    b.append(None, None, b"v" * 100)
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": PROBE, "partition_data": [{"index": partition, "records": b.build()}]}]}
    return encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, 1, "probe", body)


def producer(port: int, partition: int, rate: float, stop: Any, out: Any) -> None:
    """One request in flight, paced to `rate`/s: (send time, latency ms) of each."""
    s = connect(port)
    frame = produce_frame(partition)
    samples: list[tuple[float, float]] = []
    interval = 1.0 / rate
    nxt = time.monotonic()
    while not stop.is_set():
        now = time.monotonic()
        if nxt > now:
            time.sleep(nxt - now)
        t = time.monotonic()
        s.sendall(frame)
        recv_frame(s)
        samples.append((t, (time.monotonic() - t) * 1e3))
        nxt = max(nxt + interval, t)
    s.close()
    out.put(samples)


def metadata_all(port: int, rounds: int) -> tuple[list[float], int]:
    from kafkactl.protocol.api_keys import ApiKey
    from kafkactl.protocol.codec import decode_response, encode_request

    body = {"topics": None, "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}
    frame = encode_request(ApiKey.METADATA, METADATA_VERSION, 1, "bench", body)
    times: list[float] = []
    with connect(port) as s:
        for _ in range(rounds):
            t = time.perf_counter()
            s.sendall(frame)
            resp = recv_frame(s)
            times.append((time.perf_counter() - t) * 1e3)
    parts = sum(len(t["partitions"]) for t in
                decode_response(ApiKey.METADATA, METADATA_VERSION, resp)["topics"])
    return times, parts


def create(port: int, topics: list[tuple[str, int]]) -> float:
    from kafkactl.protocol.api_keys import ApiKey

    t = time.perf_counter()
    with connect(port) as s:
        resp = call(s, ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, create_topics_body(topics))
    bad = [(r["name"], r["error_code"], r.get("error_message")) for r in resp["topics"]
           if r["error_code"] != 0]
    if bad:
        raise RuntimeError(f"CreateTopics failed: {bad[:3]}")
    return time.perf_counter() - t


def delete(port: int, names: list[str]) -> float:
    from kafkactl.protocol.api_keys import ApiKey

    t = time.perf_counter()
    with connect(port) as s:
        resp = call(s, ApiKey.DELETE_TOPICS, 4, {"topic_names": names, "timeout_ms": 600_000})
    bad = [(r["name"], r["error_code"]) for r in resp["responses"] if r["error_code"] != 0]
    if bad:
        raise RuntimeError(f"DeleteTopics failed: {bad[:3]}")
    return time.perf_counter() - t


def wait_metadata(port: int, timeout: float) -> None:
    from kafkactl.protocol.api_keys import ApiKey

    deadline = time.monotonic() + timeout
    while True:
        try:
            with connect(port) as s:
                call(s, ApiKey.METADATA, METADATA_VERSION,
                     {"topics": [], "allow_auto_topic_creation": False,
                      "include_topic_authorized_operations": False})
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def start_timed(data_dir: Path) -> tuple[Broker, float]:
    t = time.monotonic()
    b = start_broker(data_dir=data_dir)
    wait_metadata(b.port, 60)
    return b, time.monotonic() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100, help="per topic")
    ap.add_argument("--big", type=int, default=6000, help="partitions of the stall phase")
    ap.add_argument("--producers", type=int, default=3)
    ap.add_argument("--rate", type=float, default=200.0, help="requests/s per producer")
    ap.add_argument("--before-s", type=float, default=3.0)
    ap.add_argument("--metadata-rounds", type=int, default=20)
    ap.add_argument("--summary-json")
    args = ap.parse_args()
    total = args.topics * args.partitions
    rows: list[dict[str, Any]] = []
    root = Path(tempfile.mkdtemp(prefix="kafkactl-many-parts-"))
    try:
        # -- an empty broker: the baselines
        empty, empty_start = start_timed(root / "empty")
        empty_rss, empty_fds = rss_bytes(empty.proc.pid), open_fds(empty.proc.pid)
        empty.stop()

        broker, _ = start_timed(root / "data")
        port, pid = broker.port, broker.proc.pid
        t0 = time.perf_counter()
        names = [f"t{i:03d}" for i in range(args.topics)]
        for i in range(0, len(names), 10):
            create(port, [(n, args.partitions) for n in names[i:i + 10]])
        create_s = time.perf_counter() - t0
        print(f"created {total} partitions in {create_s:.1f} s")
        create(port, [(PROBE, args.producers)])
        rss, fds = rss_bytes(pid), open_fds(pid)
        rss_pp = (rss - empty_rss) / total
        fds_pp = (fds - empty_fds) / total

        times, seen = metadata_all(port, args.metadata_rounds)
        print(f"Metadata for all topics: {seen} partitions, p50 {percentile(times, .5):.1f} "
              f"ms, max {max(times):.1f} ms")

        # -- restart after a clean stop
        t = time.monotonic()
        broker.stop()
        stop_s = time.monotonic() - t
        broker, start_s = start_timed(root / "data")
        port, pid = broker.port, broker.proc.pid
        print(f"clean stop {stop_s:.1f} s, start {start_s:.1f} s")

        # -- the stall phase: producers before and during one big CreateTopics
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        warm = 1.0
        stop = ctx.Event()
        procs = [ctx.Process(target=producer, args=(port, i, args.rate, stop, out))
                 for i in range(args.producers)]
        for p in procs:
            p.start()
        time.sleep(warm)
        before0 = time.monotonic()
        time.sleep(args.before_s)
        during0 = time.monotonic()
        big_s = create(port, [("big", args.big)])
        during1 = time.monotonic()
        rss_big = rss_bytes(pid)
        time.sleep(1.0)
        deleting0 = time.monotonic()
        delete_s = delete(port, ["big"])
        deleting1 = time.monotonic()
        print(f"DeleteTopics of {args.big} partitions took {delete_s:.2f} s")
        print(f"CreateTopics of {args.big} partitions took {big_s:.2f} s")
        stop.set()
        samples: list[tuple[float, float]] = []
        for _ in procs:
            samples += out.get(timeout=60)
        for p in procs:
            p.join()
        before = [lat for t, lat in samples if before0 <= t < during0]
        during = [lat for t, lat in samples if during0 <= t < during1]
        deleting = [lat for t, lat in samples if deleting0 <= t < deleting1]
        broker.stop()

        total_now = total + args.big + args.producers
        rows += [
            row(GOAL, f"start-up, {total} partitions", start_s, "s", "<= 10 s",
                baseline="empty broker", baseline_value=empty_start),
            row(GOAL, f"clean stop, {total} partitions", stop_s, "s", "report"),
            row(GOAL, f"Metadata all topics p50 ({total} partitions)",
                percentile(times, .5), "ms", "<= 50 ms"),
            row(GOAL, "Metadata all topics max", max(times), "ms", "<= 50 ms"),
            row(GOAL, f"produce p99 during CreateTopics {args.big}",
                percentile(during, .99), "ms", "<= 50 ms",
                baseline="p99 before", baseline_value=percentile(before, .99)),
            row(GOAL, f"produce max during CreateTopics {args.big}",
                max(during) if during else float("nan"), "ms", "report"),
            row(GOAL, f"CreateTopics {args.big} partitions", big_s, "s", "report"),
            row(GOAL, f"produce p99 during DeleteTopics {args.big}",
                percentile(deleting, .99), "ms", "<= 50 ms (not in the issue)",
                baseline="p99 before", baseline_value=percentile(before, .99)),
            row(GOAL, f"DeleteTopics {args.big} partitions", delete_s, "s", "report"),
            row(GOAL, "RSS per partition", rss_pp / 1024, "KiB", "report",
                baseline=f"empty broker {empty_rss / 2**20:.1f} MiB"),
            row(GOAL, "open files per partition", fds_pp, "fds", "report (Kafka ~4/segment)"),
            row(GOAL, f"RSS with {total_now} partitions", rss_big / 2**20, "MiB", "report"),
        ]
        print(f"producer samples: {len(before)} before, {len(during)} during create, "
              f"{len(deleting)} during delete")
        print(f"ulimit -n needed: about {total_now} + connections + 100 "
              f"(this machine's soft limit: {resource.getrlimit(resource.RLIMIT_NOFILE)[0]})")
        print_rows(rows)
        write_summary(args.summary_json, rows)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
