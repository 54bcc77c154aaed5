"""Ingest: a librdkafka producer (confluent-kafka, linger 5 ms, 1 MiB batches, acks=1) sends
100-byte records for ~N seconds to `kafkactl serve`; records/s and payload MB/s next to a raw
page-cache `os.write` of the same bytes, and Redis Streams XADD via `redis-benchmark -P 100`
when redis-server is installed. All in the same run; ratios are what to compare.

The same producer loop is also run against librdkafka's in-process mock broker
(`test.mock.num.brokers=1`) in the same run: that is the client's own ceiling on this box
(the Python produce() loop plus librdkafka's threads), so kafkactl/mock near 1.0 means the
broker is not what limits the single-producer figure. `--producers N` runs N producer
processes at once (one per core) to load the broker past one Python loop. `kcat -P` (the
same librdkafka, driven from C, reading a file of lines; start-up and file read included)
shows the broker's ingest with a producer that has no Python loop.

    python bench/broker_ingest.py [--seconds 10] [--partitions 1] [--producers 1]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from broker_common import free_port, start_broker
from confluent_kafka import Producer
from summary import Row, add_summary_option, write_summary

VALUE = b"x" * 100


def run_producer(bootstrap: str | None, seconds: float, partitions: int) -> tuple[int, float]:
    """The producer loop; bootstrap None = librdkafka's mock broker (the client ceiling)."""
    target = {"bootstrap.servers": bootstrap} if bootstrap else {"test.mock.num.brokers": 1}
    p = Producer({**target, "linger.ms": 5, "acks": 1,
                  "batch.size": 1 << 20, "batch.num.messages": 100000,
                  "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 1 << 20, "enable.idempotence": False})
    errors = [0]

    def on_error(err: object, msg: object) -> None:
        if err is not None:
            errors[0] += 1

    # Warm up: metadata, topic creation, connection.
    p.produce("ingest", VALUE, on_delivery=on_error)
    p.flush(10)
    produce, poll = p.produce, p.poll
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        for _ in range(10000):
            try:
                produce("ingest", VALUE)
            except BufferError:
                poll(0.001)
                continue
            n += 1
        poll(0)
        if time.perf_counter() >= deadline:
            break
    left = p.flush(60)
    dt = time.perf_counter() - t0
    if errors[0] or left:
        raise RuntimeError(f"{errors[0]} delivery errors, {left} undelivered")
    return n, dt


def _producer_proc(bootstrap: str | None, seconds: float, partitions: int, out: object) -> None:
    out.put(run_producer(bootstrap, seconds, partitions))  # type: ignore[attr-defined]


def run_producers(bootstrap: str | None, seconds: float, partitions: int,
                  count: int) -> tuple[int, float]:
    """`count` producer processes at once; total records and the longest run's duration."""
    if count == 1:
        return run_producer(bootstrap, seconds, partitions)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_producer_proc, args=(bootstrap, seconds, partitions, out))
             for _ in range(count)]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=seconds + 120) for _ in procs]
    for proc in procs:
        proc.join(30)
    return sum(n for n, _ in results), max(dt for _, dt in results)


def wire_producer(bootstrap: str, seconds: float) -> tuple[int, float]:
    """The broker's own ceiling: prebuilt Produce v9 requests (one ~1 MiB batch of 100-byte
    records each), 5 in flight on one connection, from a plain socket (no client work)."""
    from kafkactl.protocol import codec
    from kafkactl.protocol.api_keys import ApiKey
    from kafkactl.record.batch import RecordBatchBuilder

    b = RecordBatchBuilder()
    ts = int(time.time() * 1000)
    while b.size_in_bytes() < (1 << 20) - 200:
        b.append(ts, None, VALUE)
    per_batch = b.record_count
    req = codec.encode_request(ApiKey.PRODUCE, 9, 1, "wire", {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "ingest-wire", "partition_data": [{"index": 0, "records": b.build()}]}]})
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    rfile = sock.makefile("rb")

    def read_response() -> None:
        size = int.from_bytes(rfile.read(4), "big")
        rfile.read(size)

    sock.sendall(req)
    read_response()  # auto-creates the topic
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    for _ in range(5):
        sock.sendall(req)
    while time.perf_counter() < deadline:
        read_response()
        n += per_batch
        sock.sendall(req)
    for _ in range(5):
        read_response()
        n += per_batch
    dt = time.perf_counter() - t0
    sock.close()
    return n, dt


KCAT_PRODUCER_PROPS = ["linger.ms=5", "batch.size=1048576", "batch.num.messages=100000",
                       "queue.buffering.max.messages=2000000",
                       "queue.buffering.max.kbytes=1048576", "acks=1",
                       "enable.idempotence=false"]


def kcat_producer(bootstrap: str, records: int) -> tuple[int, float] | None:
    """`kcat -P -l FILE` of `records` 100-byte lines to partition 0 of `ingest-kcat`."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        return None
    d = Path(tempfile.mkdtemp(prefix="kafkactl-bench-kcat-"))
    try:
        lines = d / "lines"
        with open(lines, "wb") as f:
            chunk = (VALUE + b"\n") * 100_000
            for _ in range(records // 100_000):
                f.write(chunk)
        n = records // 100_000 * 100_000
        cmd = [kcat, "-P", "-b", bootstrap, "-t", "ingest-kcat", "-p", "0", "-l", str(lines)]
        for prop in KCAT_PRODUCER_PROPS:
            cmd += ["-X", prop]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, timeout=600)
        return n, time.perf_counter() - t0
    finally:
        shutil.rmtree(d, ignore_errors=True)


def raw_write(total_bytes: int) -> float:
    d = Path(tempfile.mkdtemp(prefix="kafkactl-bench-raw-"))
    chunk = os.urandom(1 << 20)
    fd = os.open(d / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    written = 0
    while written < total_bytes:
        written += os.write(fd, chunk)
    dt = time.perf_counter() - t0
    os.close(fd)
    shutil.rmtree(d)
    return written / dt / 1e6


def redis_xadd(n: int) -> float | None:
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        return None
    port = free_port()
    d = tempfile.mkdtemp(prefix="kafkactl-bench-redis-")
    srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                            "--dir", d], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        t0 = time.perf_counter()
        subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "1",
                        "-n", str(n), "-P", "100", "-q", "XADD", "s", "*", "v", "x" * 100],
                       check=True, stdout=subprocess.DEVNULL)
        return n / (time.perf_counter() - t0)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--producers", type=int, default=1)
    ap.add_argument("--kcat-records", type=int, default=10_000_000)
    add_summary_option(ap)
    args = ap.parse_args()
    mn, mdt = run_producers(None, args.seconds, args.partitions, args.producers)
    broker = start_broker(f"num.partitions={args.partitions}")
    try:
        cpu0 = broker.cpu_seconds()
        n, dt = run_producers(broker.bootstrap, args.seconds, args.partitions,
                              args.producers)
        cpu = broker.cpu_seconds() - cpu0
        on_disk = sum(f.stat().st_size for f in broker.data_dir.glob("ingest-0/*.log"))
        cpu1 = broker.cpu_seconds()
        wn, wdt = wire_producer(broker.bootstrap, min(args.seconds, 5.0))
        wcpu = broker.cpu_seconds() - cpu1
        cpu2 = broker.cpu_seconds()
        kcat = kcat_producer(broker.bootstrap, args.kcat_records)
        kcpu = broker.cpu_seconds() - cpu2
    finally:
        broker.stop()
        shutil.rmtree(broker.data_dir, ignore_errors=True)
    rate = n / dt
    raw = raw_write(on_disk)
    redis = redis_xadd(min(n, 2_000_000))
    print(f"kafkactl serve  : {n:,} records in {dt:.2f} s = {rate:,.0f} records/s, "
          f"{rate * 100 / 1e6:.1f} MB/s payload, {on_disk / dt / 1e6:.1f} MB/s on disk; "
          f"broker CPU {cpu / dt * 100:.0f}% of a core")
    print(f"mock broker     : {mn / mdt:,.0f} records/s: the same producer loop ({args.producers} "
          f"process(es)) against librdkafka's mock (kafkactl/mock = {rate / (mn / mdt):.2f})")
    print(f"wire producer   : {wn:,} records in {wdt:.2f} s = {wn / wdt:,.0f} records/s, "
          f"{wn * 110.5 / wdt / 1e6:.0f} MB/s on the wire (prebuilt 1 MiB batches, 5 in "
          f"flight); broker CPU {wcpu / wdt * 100:.0f}% of a core")
    if kcat is None:
        print("kcat -P         : kcat not installed; skipped")
    else:
        kn, kdt = kcat
        print(f"kcat -P         : {kn:,} records in {kdt:.2f} s = {kn / kdt:,.0f} records/s "
              f"(librdkafka from C, whole process); broker CPU {kcpu / kdt * 100:.0f}% of a "
              f"core")
    print(f"raw os.write    : {raw:,.0f} MB/s of the same {on_disk / 1e6:.0f} MB "
          f"(broker/raw = {on_disk / dt / 1e6 / raw:.3f})")
    if redis is None:
        print("redis XADD      : redis-server/redis-benchmark not installed; skipped")
    else:
        print(f"redis XADD -P100: {redis:,.0f} records/s (kafkactl/redis = {rate / redis:.2f})")
    goal = "6 keep: ingest"
    rows = [Row(goal, f"confluent-kafka x{args.producers} -> kafkactl serve", rate, "rec/s",
                "librdkafka mock broker, same loop", mn / mdt, rate / (mn / mdt),
                ">= 1 M rec/s", rate >= 1e6)]
    if kcat is not None:
        krate = kcat[0] / kcat[1]
        rows.append(Row(goal, "kcat -P -> kafkactl serve", krate, "rec/s", "", None, None,
                        ">= 1 M rec/s", krate >= 1e6))
    write_summary(args.summary_json, rows)


if __name__ == "__main__":
    main()
