"""Size independence (issue 20, goal 5; seed 000's O(1) appends and reads).

Two one-partition topics on one `kafkactl serve`: `small` with `--small-mb` retained and
`large` with `--large-gb` retained in segments of `--segment-mb` (so many segments). Both
are filled before the broker starts by appending 1 MiB batches with the log layer directly
(LogManager + Log.append: the broker's own append path, minus the network), then:

- ingest + tail: for each topic, a producer process (prebuilt 1 MiB Produce requests,
  5 in flight) and a consumer process fetching from the log end (long polls) run for
  `--seconds`; records/s produced and MB/s consumed, large against small (goal: within
  10%), after a warm-up round, in the order small, large, large, small (means compared);
- catch-up: a consumer fetching `large` from offset 0 to its end (Fetch v12, `--fetch-mb`
  per partition, bytes not parsed), against a raw `os.sendfile` of the same segment files
  over loopback into a receive buffer of the same `--fetch-mb` (broker_common.raw_sendfile),
  alternated twice, best of each (goal >= 0.8x).

Disk: the large topic needs `--large-gb` free plus margin (checked before writing).

    python bench/size_independence.py [--large-gb 2] [--small-mb 100] [--segment-mb 64]
                                      [--seconds 5] [--summary-json PATH]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_rows import connect, print_rows, recv_frame, row, write_summary
from broker_common import raw_sendfile, start_broker
from many_partitions import create

GOAL = "5 size"
VALUE = b"v" * 100


def one_mib_batch() -> tuple[bytes, int]:
    from kafkactl.record.builder import RecordBatchBuilder

    b = RecordBatchBuilder()
    ts = int(time.time() * 1000)
    n = 0
    while n * 110 < 1_000_000:  # under max.message.bytes (1 MiB + 12) with headers
        b.append(ts, None, VALUE)
        n += 1
    return b.build(), n


def fill(data_dir: Path, sizes: dict[str, int], segment_bytes: int) -> dict[str, int]:
    """Append 1 MiB batches to each topic's partition 0 until it holds its size; the
    records written per topic."""
    from kafkactl.log.config import LogConfig
    from kafkactl.log.manager import LogManager

    config = LogConfig.from_properties({"log.segment.bytes": str(segment_bytes)})
    lm = LogManager([data_dir], config, topic_config=lambda _t: config)
    lm.load()
    batch, per_batch = one_mib_batch()
    written: dict[str, int] = {}
    try:
        for topic, size in sizes.items():
            lg = lm.get_log((topic, 0)) or lm.create_log(topic, 0, config)
            lg.config = config
            n = 0
            while n * len(batch) < size:
                lg.append(bytearray(batch))
                n += 1
            lg.flush()
            written[topic] = n * per_batch
    finally:
        lm.shutdown()
    return written


FETCH_BYTES = 8 << 20  # per partition, as broker_egress.py fetches


def fetch_body(topic: str, offset: int, max_wait_ms: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1,
            "max_bytes": 2 * FETCH_BYTES, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": FETCH_BYTES,
                 "current_leader_epoch": -1, "log_start_offset": -1,
                 "last_fetched_epoch": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def next_offset(records: Any, offset: int) -> int:
    """The offset after the last whole batch in `records` (headers only)."""
    mv = memoryview(records) if records is not None else memoryview(b"")
    pos = 0
    while pos + 27 <= len(mv):
        base = int.from_bytes(mv[pos:pos + 8], "big")
        length = int.from_bytes(mv[pos + 8:pos + 12], "big")
        if pos + 12 + length > len(mv):
            break
        offset = base + int.from_bytes(mv[pos + 23:pos + 27], "big") + 1
        pos += 12 + length
    return offset


def consume(port: int, topic: str, offset: int, end: int | None, stop_at: float
            ) -> tuple[int, float]:
    """Fetch from `offset` until `end` (or until `stop_at`) into one reused buffer;
    (bytes, seconds)."""
    from kafkactl.protocol.api_keys import ApiKey
    from kafkactl.protocol.codec import decode_response, encode_request

    s = connect(port)
    buf = bytearray(16 << 20)
    view = memoryview(buf)
    total = 0
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    cid = 0
    while (end is None or offset < end) and time.monotonic() < stop_at:
        cid += 1
        s.sendall(encode_request(ApiKey.FETCH, 12, cid, "bench",
                                 fetch_body(topic, offset, 500 if end is None else 0)))
        got = 0
        while got < 4:
            got += s.recv_into(view[got:4])
        size = int.from_bytes(buf[:4], "big") + 4
        if size > len(buf):
            buf = bytearray(size)
            buf[:4] = view[:4]
            view = memoryview(buf)
        while got < size:
            n = s.recv_into(view[got:size])
            if not n:
                raise ConnectionError("the broker closed the connection")
            got += n
        total += size
        resp = decode_response(ApiKey.FETCH, 12, view[4:size])
        offset = next_offset(resp["responses"][0]["partitions"][0]["records"], offset)
    dt = time.perf_counter() - t0
    s.close()
    if end is not None:
        print(f"consumer CPU {(time.process_time() - cpu0) / dt:.0%}", end="; ")
    return total, dt


def log_end(port: int, topic: str) -> int:
    from bench_rows import call

    from kafkactl.protocol.api_keys import ApiKey

    with connect(port) as s:
        r = call(s, ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return int(r["topics"][0]["partitions"][0]["offset"])


def producer(port: int, topic: str, t0: float, t1: float, out: Any) -> None:
    from kafkactl.protocol.api_keys import ApiKey
    from kafkactl.protocol.codec import decode_response, encode_request

    batch, per_batch = one_mib_batch()
    req = encode_request(ApiKey.PRODUCE, 9, 1, "bench", {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    s = connect(port)
    s.sendall(req)
    resp = decode_response(ApiKey.PRODUCE, 9, recv_frame(s))
    error = resp["responses"][0]["partition_responses"][0]["error_code"]
    if error:
        raise RuntimeError(f"produce failed: {resp}")
    while time.monotonic() < t0 - 0.5:
        time.sleep(0.01)
    for _ in range(5):
        s.sendall(req)
    n = 0
    while (now := time.monotonic()) < t1:
        recv_frame(s)
        if now >= t0:
            n += per_batch
        s.sendall(req)
    for _ in range(5):
        recv_frame(s)
    s.close()
    out.put(("produce", n))


def tail_consumer(port: int, topic: str, start: int, t0: float, t1: float, out: Any) -> None:
    while time.monotonic() < t0:
        time.sleep(0.01)
    total, _dt = consume(port, topic, start, None, t1)
    out.put(("consume", total))


def ingest_and_tail(port: int, topic: str, seconds: float) -> tuple[float, float]:
    """(records/s produced, MB/s consumed from the tail) over `seconds`. The page cache's
    dirty pages are written back first: a round writes ~1 GB, and the next one would
    otherwise meet the kernel's write-back throttling at a point that depends on its
    predecessor (rounds swung 1.1-2.5 M rec/s without this)."""
    os.sync()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start = log_end(port, topic)
    t0 = time.monotonic() + 2.5
    t1 = t0 + seconds
    procs = [ctx.Process(target=producer, args=(port, topic, t0, t1, out)),
             ctx.Process(target=tail_consumer, args=(port, topic, start, t0, t1, out))]
    for p in procs:
        p.start()
    got = dict(out.get(timeout=seconds + 60) for _ in procs)
    for p in procs:
        p.join()
    return got["produce"] / seconds, got["consume"] / seconds / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--large-gb", type=float, default=2.0)
    ap.add_argument("--small-mb", type=float, default=100.0)
    ap.add_argument("--segment-mb", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the data goes")
    ap.add_argument("--fetch-mb", type=int, default=32,
                    help="Fetch partition_max_bytes (Kafka's fetch.max.bytes is 50 MiB)")
    ap.add_argument("--summary-json")
    args = ap.parse_args()
    global FETCH_BYTES
    FETCH_BYTES = args.fetch_mb << 20
    large = int(args.large_gb * 2**30)
    free = shutil.disk_usage(args.dir).free
    if free < large * 1.2 + 2**30:
        raise SystemExit(f"{args.dir} has {free / 2**30:.1f} GiB free; --large-gb "
                         f"{args.large_gb} needs {large * 1.2 / 2**30 + 1:.1f}")
    root = Path(tempfile.mkdtemp(prefix="kafkactl-size-", dir=args.dir))
    data = root / "data"
    broker = None
    try:
        segment = args.segment_mb << 20
        broker = start_broker(data_dir=data)
        create(broker.port, [("small", 1), ("large", 1)])
        broker.stop()
        t = time.perf_counter()
        fill(data, {"small": int(args.small_mb * 2**20), "large": large}, segment)
        fill_s = time.perf_counter() - t
        os.sync()  # the fill's dirty pages written back now, not during the first phase
        segs = sorted((data / "large-0").glob("*.log"))
        print(f"filled {large / 2**30:.1f} GiB ({len(segs)} segments) in {fill_s:.1f} s")
        # The fill leaves no producer-state snapshot (a broker writes one at every clean
        # stop), so the first start rebuilds it from every batch header of the log; the
        # start that counts is the next one, after a clean stop, as an operator's would be.
        t = time.monotonic()
        broker = start_broker(f"log.segment.bytes={segment}", data_dir=data)
        rebuild_s = time.monotonic() - t
        broker.stop()
        t = time.monotonic()
        broker = start_broker(f"log.segment.bytes={segment}", data_dir=data)
        start_s = time.monotonic() - t
        print(f"start-up: {rebuild_s:.2f} s rebuilding producer state from the whole log, "
              f"{start_s:.2f} s after a clean stop")
        port = broker.port

        # a warm-up round first: the first seconds of writes fill the page cache before
        # write-back throttles them, which would favour whichever topic comes first
        rate, _tail = ingest_and_tail(port, "small", args.seconds)
        print(f"warm-up: {rate:,.0f} rec/s in (not counted)")
        results: dict[str, list[tuple[float, float]]] = {"small": [], "large": []}
        for topic in ("small", "large", "large", "small"):  # ABBA: drift cancels out
            results[topic].append(ingest_and_tail(port, topic, args.seconds))
            rate, tail = results[topic][-1]
            print(f"{topic}: {rate:,.0f} rec/s in, tail {tail:,.0f} MB/s")
        small_in, small_tail = (sum(x) / 2 for x in zip(*results["small"], strict=True))
        large_in, large_tail = (sum(x) / 2 for x in zip(*results["large"], strict=True))

        segs = sorted((data / "large-0").glob("*.log"))
        end = log_end(port, "large")
        os.sync()  # the ingest rounds' dirty pages written back before either side runs
        sendfiles, catch_ups = [], []
        for _ in range(2):  # alternated, best of each: the machine is shared
            sendfiles.append(raw_sendfile(segs, FETCH_BYTES))
            cpu0 = broker.cpu_seconds()
            nbytes, dt = consume(port, "large", 0, end, time.monotonic() + 600)
            catch_ups.append(nbytes / dt / 1e6)
            print(f"catch-up: {nbytes / 2**30:.2f} GiB at {catch_ups[-1]:,.0f} MB/s (broker "
                  f"CPU {(broker.cpu_seconds() - cpu0) / dt:.0%}); raw sendfile "
                  f"{sendfiles[-1]:,.0f} MB/s")
        catch_up, sendfile = max(catch_ups), max(sendfiles)
        small_end = log_end(port, "small")
        nbytes, dt = consume(port, "small", 0, small_end, time.monotonic() + 600)
        small_catch_up = nbytes / dt / 1e6
        print(f"catch-up of small: {nbytes / 2**20:.0f} MiB at {small_catch_up:,.0f} MB/s")
        gb = f"{large / 2**30:.0f} GiB"
        rows = [
            row(GOAL, f"ingest, {gb} retained ({len(segs)} segments)", large_in, "rec/s",
                ">= 0.9x", baseline=f"{args.small_mb:.0f} MB retained",
                baseline_value=small_in),
            row(GOAL, f"tail consumer, {gb} retained", large_tail, "MB/s", ">= 0.9x",
                baseline=f"{args.small_mb:.0f} MB retained", baseline_value=small_tail),
            row(GOAL, f"catch-up from 0 of {gb}, {args.fetch_mb} MiB fetches", catch_up,
                "MB/s", ">= 0.8x",
                baseline="raw sendfile (best of 2)", baseline_value=sendfile),
            row(GOAL, f"catch-up from 0 of {gb} (vs small topic)", catch_up, "MB/s",
                "report", baseline=f"{args.small_mb:.0f} MB topic",
                baseline_value=small_catch_up),
            row(GOAL, f"start-up with {gb} retained (after a clean stop)", start_s, "s",
                "report"),
        ]
        print_rows(rows)
        write_summary(args.summary_json, rows)
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
