"""Low-rate producer latency: what a service sending a few records a second, or
`tail -f app.log | kafkactl produce`, sees.

1. send -> ack: kafkactl's `Producer.send(...).result()` at a steady rate (default 10
   records/s, linger.ms=5, acks=all), next to kafka-python's KafkaProducer with the same
   settings in the same run (the baseline). Goal: p50 <= 10 ms, p99 <= 25 ms.
2. line -> consumer: a line written to the stdin of a running `kafkactl produce` until a
   `kcat -C -u` follower prints it (stdin stays open, as under `tail -f`). Goal: ~50 ms.

    python bench/producer_low_rate.py [--rate 10] [--seconds 5]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time

from broker_common import start_broker


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))]


def paced(rate: float, seconds: float, send_and_wait: callable) -> list[float]:  # type: ignore[valid-type]
    out = []
    interval = 1.0 / rate
    next_at = time.perf_counter()
    end = next_at + seconds
    while next_at < end:
        delay = next_at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        t0 = time.perf_counter()
        send_and_wait()
        out.append((time.perf_counter() - t0) * 1000.0)
        next_at += interval
    return out


def kafkactl_send(bootstrap: str, rate: float, seconds: float) -> list[float]:
    from kafkactl.client.producer import Producer

    p = Producer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    p.send("lowrate", b"warm-up").result(30)
    try:
        return paced(rate, seconds, lambda: p.send("lowrate", b"x" * 100).result(30))
    finally:
        p.close()


def kafka_python_send(bootstrap: str, rate: float, seconds: float) -> list[float]:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    p.send("lowrate-kp", b"warm-up").get(30)
    try:
        return paced(rate, seconds, lambda: p.send("lowrate-kp", b"x" * 100).get(30))
    finally:
        p.close()


def tail_follow(bootstrap: str, rate: float, seconds: float) -> list[float]:
    from kafkactl.client.producer import Producer

    topic = "follow"
    p = Producer(bootstrap_servers=bootstrap)
    p.send(topic, b"created").result(30)  # the topic exists before kcat follows it
    p.close()
    prod = subprocess.Popen([sys.executable, "-m", "kafkactl", "produce", "-b", bootstrap,
                             "-t", topic, "-q"], stdin=subprocess.PIPE)
    assert prod.stdin is not None
    prod.stdin.write(b"warm-up\n")
    prod.stdin.flush()
    cons = subprocess.Popen(["kcat", "-C", "-u", "-q", "-b", bootstrap, "-t", topic,
                             "-o", "beginning", "-f", "%s\n"], stdout=subprocess.PIPE)
    assert cons.stdout is not None
    sent: dict[bytes, float] = {}
    got: list[float] = []
    ready = threading.Event()

    def reader() -> None:
        assert cons.stdout is not None
        for line in cons.stdout:
            line = line.rstrip(b"\n")
            if line == b"warm-up":
                ready.set()
            elif line in sent:
                got.append((time.perf_counter() - sent[line]) * 1000.0)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    ready.wait(30)
    n = int(rate * seconds)
    for i in range(n):
        line = b"line %d" % i
        sent[line] = time.perf_counter()
        prod.stdin.write(line + b"\n")
        prod.stdin.flush()
        time.sleep(1.0 / rate)
    deadline = time.monotonic() + 10
    while len(got) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    prod.stdin.close()
    prod.wait(30)
    cons.terminate()
    cons.wait(10)
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    broker = start_broker()
    try:
        ours = kafkactl_send(broker.bootstrap, args.rate, args.seconds)
        base = kafka_python_send(broker.bootstrap, args.rate, args.seconds)
        follow = tail_follow(broker.bootstrap, args.rate, args.seconds)
    finally:
        broker.stop()
    print(f"send->ack at {args.rate:g} records/s, linger.ms=5, acks=all "
          f"({len(ours)} records each):")
    for name, v in (("kafkactl Producer", ours), ("kafka-python (baseline)", base)):
        print(f"  {name:<24} p50 {pct(v, .5):7.2f} ms  p99 {pct(v, .99):7.2f} ms  "
              f"max {max(v):7.2f} ms")
    print(f"  ratio kafkactl/kafka-python: p50 {pct(ours, .5) / pct(base, .5):.2f}x  "
          f"p99 {pct(ours, .99) / pct(base, .99):.2f}x (goal: p50 <= 10 ms, p99 <= 25 ms)")
    if follow:
        print(f"line -> kcat follower via a kafkactl produce pipe ({len(follow)} lines): "
              f"p50 {pct(follow, .5):.1f} ms  p99 {pct(follow, .99):.1f} ms  "
              f"max {max(follow):.1f} ms (goal: ~50 ms)")
    else:
        print("line -> kcat follower: no line arrived while stdin stayed open")


if __name__ == "__main__":
    main()
