"""End-to-end latency through `kafkactl serve` at a fixed rate (default 10,000 records/s):
a confluent-kafka producer (linger 0, acks=1) stamps time.time_ns() into each value; a
confluent-kafka consumer (assign, long-poll fetches, fetch.wait.max.ms 500) in ANOTHER
PROCESS measures now - stamp. Prints p50/p99/p99.9 next to a raw loopback TCP echo round
trip measured in the same run.

Why another process: with the consumer in a thread of the producing process, every record
waits for the GIL, which the pacing loop hands over only every sys.getswitchinterval()
(5 ms): that measured the interpreter, not the broker (p99 16 ms -> ~3 ms once split).

    python bench/broker_latency.py [--rate 10000] [--seconds 5]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import statistics
import struct
import threading
import time
from typing import Any

from broker_common import start_broker
from confluent_kafka import Consumer, Producer, TopicPartition


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))]


def loopback_rtt(n: int = 2000) -> float:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def echo() -> None:
        c, _ = srv.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := c.recv(128):
            c.sendall(data)
        c.close()

    t = threading.Thread(target=echo)
    t.start()
    s = socket.create_connection(srv.getsockname())
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(n):
        t0 = time.perf_counter()
        s.sendall(b"x" * 100)
        s.recv(128)
        rtts.append((time.perf_counter() - t0) * 1e3)
    s.close()
    t.join()
    srv.close()
    return statistics.median(rtts)


def consumer_process(bootstrap: str, total: int, ready: Any, out: Any) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lat",
                  "fetch.wait.max.ms": 500, "fetch.queue.backoff.ms": 1})
    c.assign([TopicPartition("lat", 0, 1)])
    latencies: list[float] = []
    ready.set()
    deadline = time.monotonic() + 120
    while len(latencies) < total and time.monotonic() < deadline:
        m = c.poll(0.1)  # consume(n, t) would wait for n messages: poll one
        if m is not None and m.error() is None:
            sent = struct.unpack_from(">q", m.value())[0]
            latencies.append((time.time_ns() - sent) / 1e6)
    c.close()
    out.put(latencies)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    broker = start_broker()
    total = int(args.rate * args.seconds)
    latencies: list[float] = []
    cpu = 0.0
    ctx = mp.get_context("spawn")
    try:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": 1})
        p.produce("lat", b"\0" * 100)
        p.flush(10)
        ready, out = ctx.Event(), ctx.Queue()
        proc = ctx.Process(target=consumer_process, args=(broker.bootstrap, total, ready, out))
        proc.start()
        ready.wait(30)
        time.sleep(1.0)  # let the consumer connect and start polling
        pad = b"\0" * 92
        cpu0, t_cpu0 = broker.cpu_seconds(), time.perf_counter()
        interval = 1.0 / args.rate
        start = time.perf_counter()
        for i in range(total):
            # Sleep (never spin) until this record's slot; late slots are sent at once.
            delay = start + i * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            p.produce("lat", struct.pack(">q", time.time_ns()) + pad)
            p.poll(0)
        p.flush(10)
        cpu = (broker.cpu_seconds() - cpu0) / (time.perf_counter() - t_cpu0)
        latencies = out.get(timeout=150)
        proc.join(30)
    finally:
        broker.stop()
    rtt = loopback_rtt()
    print(f"records         : {len(latencies):,} of {total:,} at {args.rate:,}/s")
    print(f"end-to-end      : p50 {percentile(latencies, 0.5):.2f} ms, "
          f"p99 {percentile(latencies, 0.99):.2f} ms, p99.9 {percentile(latencies, 0.999):.2f} ms; "
          f"broker CPU {cpu * 100:.0f}% of a core")
    print(f"loopback TCP RTT: p50 {rtt * 1000:.0f} us (python echo, same run)")


if __name__ == "__main__":
    main()
