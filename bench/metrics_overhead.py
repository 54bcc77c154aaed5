"""What the Prometheus endpoint costs (issue 34's benchmarks), in one run:

- cpu     the broker's CPU per one-record Produce request (raw-socket clients, one request
          in flight each, as bench/small_requests.py's raw phase) with `metrics.listen`
          off and on, on fresh brokers, in rounds that alternate which goes first (ABBA);
          the figure is the median of the rounds' on/off ratios (goal: at most 1.05, i.e.
          5% more);
- scrape  GET /metrics on a broker hosting `--partitions` partitions (10,000 by default):
          the median and max of `--scrapes` scrapes (goal: 200 ms), against the same
          broker's answer to GET /health (the HTTP round trip alone) as the baseline.

    python bench/metrics_overhead.py [--producers 8] [--seconds 4] [--rounds 4]
                                     [--partitions 10000] [--scrapes 5] [--summary-json PATH]
"""

from __future__ import annotations

import argparse
import statistics
import time
import urllib.request

from bench_rows import call, connect, create_topics_body
from broker_common import Broker, free_port, start_broker
from small_requests import TOPIC, produce_frame, raw_client, run_clients
from summary import Row, add_summary_option, write_summary

GOAL = "34 metrics overhead"


def cpu_per_request(metrics: bool, producers: int, seconds: float) -> float:
    """µs of broker CPU per request, raw-socket clients, one partition per client."""
    overrides = [f"metrics.listen=127.0.0.1:{free_port()}"] if metrics else []
    broker = start_broker(*overrides)
    try:
        with connect(broker.port) as s:
            r = call(s, 19, 4, create_topics_body([(TOPIC, producers)]))
            assert r["topics"][0]["error_code"] == 0, r
        frames = [produce_frame(i, 1) for i in range(producers)]
        results, cpu = run_clients(raw_client, lambda i: (broker.port, frames[i]), producers,
                                   broker.proc.pid, seconds)
        requests = sum(results)
        return sum(cpu) / requests * 1e6  # user + system
    finally:
        broker.stop()


def _get(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
    return (time.perf_counter() - t0) * 1e3


def scrape_times(partitions: int, scrapes: int) -> tuple[list[float], list[float]]:
    """(ms of each /metrics scrape, ms of each /health) with `partitions` partitions."""
    mport = free_port()
    broker: Broker = start_broker(f"metrics.listen=127.0.0.1:{mport}")
    try:
        per_topic = 100
        with connect(broker.port) as s:
            for first in range(0, partitions // per_topic, 10):
                topics = [(f"m{t}", per_topic) for t in
                          range(first, min(first + 10, partitions // per_topic))]
                r = call(s, 19, 4, create_topics_body(topics))
                assert all(t["error_code"] == 0 for t in r["topics"]), r
        base = f"http://127.0.0.1:{mport}"
        _get(base + "/metrics")  # the first scrape builds what later ones reuse
        scrape = [_get(base + "/metrics") for _ in range(scrapes)]
        health = [_get(base + "/health") for _ in range(scrapes)]
        return scrape, health
    finally:
        broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--producers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--scrapes", type=int, default=5)
    add_summary_option(ap)
    args = ap.parse_args()

    off: list[float] = []
    on: list[float] = []
    pairs: list[float] = []
    for i in range(args.rounds):  # ABBA: drift in the machine's load, and order, hit both
        order = (False, True) if i % 2 == 0 else (True, False)
        got = {metrics: cpu_per_request(metrics, args.producers, args.seconds)
               for metrics in order}
        off.append(got[False])
        on.append(got[True])
        pairs.append(got[True] / got[False])
        print(f"round: metrics off {off[-1]:.1f} µs/req, on {on[-1]:.1f} µs/req "
              f"({pairs[-1]:.3f}x; {'off' if not order[0] else 'on'} first)", flush=True)
    ratio = statistics.median(pairs)  # each pair measured side by side
    print(f"broker CPU per Produce request: off {statistics.median(off):.1f} µs, "
          f"on {statistics.median(on):.1f} µs: {ratio:.3f}x (goal <= 1.05)")
    scrape, health = scrape_times(args.partitions, args.scrapes)
    med = statistics.median(scrape)
    print(f"/metrics with {args.partitions} partitions: median {med:.0f} ms, max "
          f"{max(scrape):.0f} ms (goal <= 200 ms); /health {statistics.median(health):.1f} ms")
    med_off, med_on = statistics.median(off), statistics.median(on)
    write_summary(args.summary_json, [
        Row(GOAL, "broker CPU per Produce request, metrics on", med_on, "µs",
            "metrics off", med_off, ratio, "<= 1.05x", ratio <= 1.05),
        Row(GOAL, f"/metrics scrape, {args.partitions} partitions (median)", med, "ms",
            "/health", statistics.median(health), None, "<= 200 ms", med <= 200),
    ])


if __name__ == "__main__":
    main()
