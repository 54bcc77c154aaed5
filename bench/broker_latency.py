"""End-to-end latency through `kafkactl serve` at a fixed rate (default 10,000 records/s):
a confluent-kafka producer (linger 0, acks=1) stamps time.time_ns() into each value; a
confluent-kafka consumer (assign, long-poll fetches) in another thread measures now - stamp.
Prints p50/p99/p99.9 next to a raw loopback TCP echo round trip measured in the same run.

    python bench/broker_latency.py [--rate 10000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import threading
import time

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    broker = start_broker()
    latencies: list[float] = []
    total = int(args.rate * args.seconds)
    try:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": 1})
        p.produce("lat", b"\0" * 100)
        p.flush(10)
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lat",
                      "fetch.wait.max.ms": 500, "fetch.queue.backoff.ms": 1})
        c.assign([TopicPartition("lat", 0, 1)])
        done = threading.Event()

        def consume() -> None:
            while len(latencies) < total and not done.is_set():
                m = c.poll(0.1)  # consume(n, t) would wait for n messages: poll one
                if m is not None and m.error() is None:
                    sent = struct.unpack_from(">q", m.value())[0]
                    latencies.append((time.time_ns() - sent) / 1e6)

        t = threading.Thread(target=consume)
        t.start()
        time.sleep(1.0)  # let the consumer connect and start polling
        pad = b"\0" * 92
        interval = 1.0 / args.rate
        start = time.perf_counter()
        for i in range(total):
            target = start + i * interval
            while (now := time.perf_counter()) < target:
                if target - now > 0.0005:
                    time.sleep(target - now - 0.0003)
            p.produce("lat", struct.pack(">q", time.time_ns()) + pad)
            p.poll(0)
        p.flush(10)
        t.join(timeout=30)
        done.set()
        c.close()
    finally:
        broker.stop()
    rtt = loopback_rtt()
    print(f"records         : {len(latencies):,} of {total:,} at {args.rate:,}/s")
    print(f"end-to-end      : p50 {percentile(latencies, 0.5):.2f} ms, "
          f"p99 {percentile(latencies, 0.99):.2f} ms, p99.9 {percentile(latencies, 0.999):.2f} ms")
    print(f"loopback TCP RTT: p50 {rtt * 1000:.0f} us (python echo, same run)")


if __name__ == "__main__":
    main()
