"""Many connections (issue 20, goal 4): 2,000 idle connections beside 20 active producers.

Phases, in one run against one `kafkactl serve`:
- alone   `--producers` processes, each one raw-socket connection keeping one Produce
          request in flight (a batch of `--records` records of 100 bytes, acks=1), for
          `--seconds`; the figure is records/s acknowledged;
- idle    `--idle` more connections are opened and left idle (half of them did an
          ApiVersions first, half only connected), then the same producers run again;
- alone   the producers once more, after the idle connections closed (the baseline is
          the mean of both `alone` rounds, so a drift of the shared machine shows).

Also: the broker's RSS per idle connection (RSS with them minus before, over their count).

    python bench/many_connections.py [--idle 2000] [--producers 20] [--seconds 5]
                                     [--summary-json PATH]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import socket
import struct
import time
from typing import Any

from bench_rows import (
    connect,
    open_fds,
    print_rows,
    recv_frame,
    row,
    rss_bytes,
    wait_until,
    write_summary,
)
from broker_common import start_broker
from many_partitions import create

GOAL = "4 connections"
TOPIC = "conns"
_SIZE = struct.Struct(">i")


def produce_frame(partition: int, records: int) -> bytes:
    from kafkactl.protocol.api_keys import ApiKey
    from kafkactl.protocol.codec import encode_request
    from kafkactl.record.builder import RecordBatchBuilder

    b = RecordBatchBuilder()
    for _ in range(records):
        b.append(None, None, b"v" * 100)
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": partition, "records": b.build()}]}]}
    return encode_request(ApiKey.PRODUCE, 9, 1, "conns", body)


def producer(port: int, partition: int, records: int, seconds: float, ready: Any, go: Any,
             out: Any) -> None:
    """One request in flight; the requests answered in `seconds` after a 0.5 s warm-up
    that starts when every producer is connected (`go`)."""
    s = connect(port)
    frame = produce_frame(partition, records)
    ready.put(1)
    go.wait()
    t0 = time.monotonic() + 0.5
    t1 = t0 + seconds
    done = 0
    while (now := time.monotonic()) < t1:
        s.sendall(frame)
        recv_frame(s)
        if now >= t0:
            done += 1
    s.close()
    out.put(done)


def run_producers(port: int, n: int, records: int, seconds: float) -> float:
    """Records/s acknowledged to `n` producer processes over `seconds`."""
    ctx = mp.get_context("spawn")
    out, ready, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=producer, args=(port, i, records, seconds, ready, go, out))
             for i in range(n)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    go.set()
    total = sum(out.get(timeout=seconds + 60) for _ in procs)
    for p in procs:
        p.join()
    return total * records / seconds


def open_idle(port: int, n: int) -> list[socket.socket]:
    from kafkactl.protocol.api_keys import ApiKey
    from kafkactl.protocol.codec import encode_request

    versions = encode_request(ApiKey.API_VERSIONS, 0, 1, "idle", {})
    conns: list[socket.socket] = []
    while len(conns) < n:  # in steps the listen backlog always has room for
        batch = [socket.create_connection(("127.0.0.1", port))
                 for _ in range(min(500, n - len(conns)))]
        for i, s in enumerate(batch):
            if i % 2 == 0:
                s.sendall(versions)
        for i, s in enumerate(batch):
            if i % 2 == 0:
                recv_frame(s)
        conns += batch
    return conns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--idle", type=int, default=2000)
    ap.add_argument("--producers", type=int, default=20)
    ap.add_argument("--records", type=int, default=50, help="records per Produce request")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--summary-json")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.idle + 1024
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, need), hard))
    broker = start_broker()
    try:
        port, pid = broker.port, broker.proc.pid
        create(port, [(TOPIC, args.producers)])
        alone1 = run_producers(port, args.producers, args.records, args.seconds)
        print(f"alone: {alone1:,.0f} records/s")
        fds0, rss0 = open_fds(pid), rss_bytes(pid)
        conns = open_idle(port, args.idle)
        wait_until(lambda: open_fds(pid) >= fds0 + args.idle, 30, "the idle connections")
        rss1 = rss_bytes(pid)
        cpu0 = broker.cpu_seconds()
        time.sleep(2.0)
        idle_cpu = (broker.cpu_seconds() - cpu0) / 2.0
        with_idle = run_producers(port, args.producers, args.records, args.seconds)
        print(f"with {args.idle} idle: {with_idle:,.0f} records/s")
        for s in conns:
            s.close()
        wait_until(lambda: open_fds(pid) < fds0 + 10, 30, "the idle connections to close")
        alone2 = run_producers(port, args.producers, args.records, args.seconds)
        print(f"alone again: {alone2:,.0f} records/s")
        base = (alone1 + alone2) / 2
        rows = [
            row(GOAL, f"{args.producers} producers + {args.idle} idle", with_idle, "rec/s",
                ">= 0.9x alone", baseline="alone (mean of 2)", baseline_value=base),
            row(GOAL, "RSS per idle connection", (rss1 - rss0) / args.idle / 1024, "KiB",
                "report"),
            row(GOAL, f"broker CPU with {args.idle} idle", idle_cpu * 100, "%", "report"),
        ]
        print_rows(rows)
        write_summary(args.summary_json, rows)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
