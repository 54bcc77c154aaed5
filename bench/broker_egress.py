"""Egress: consumers fetching a page-cached topic from `kafkactl serve`, next to a raw
`os.sendfile` of the same segment bytes over loopback, in the same run.

* librdkafka consumer (confluent-kafka, assign, `consume(10000)` batches): records/s, MB/s;
* wire consumer (plain socket, Fetch v12 with 8 MiB partition limit, bytes not parsed): the
  broker's own sendfile path, MB/s and its ratio to raw sendfile (goal >= 0.75), `--pairs`
  runs of each alternating, the receiver filling an 8 MiB buffer in both; with the
  wire consumer's time per fetch to the answer's first byte and the answer's streaming rate
  (the consumer is serial, as a Kafka consumer is per broker: that wait is what it loses);
* `kcat -C -e` (librdkafka from C, every record printed to /dev/null) and
  `kafkactl consume -e` (our client, values to /dev/null): whole processes, start-up included.

    python bench/broker_egress.py [--records 3000000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

from broker_common import raw_sendfile, start_broker
from broker_ingest import wire_producer
from confluent_kafka import Consumer, TopicPartition
from summary import Row, add_summary_option, write_summary

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey

WIRE_PARTITION_BYTES = 8 << 20  # the wire consumer's partition_max_bytes


def fill(bootstrap: str, records: int) -> int:
    n = 0
    while n < records:
        got, _ = wire_producer(bootstrap, 1.0)
        n += got
    return n


def librdkafka_consume(bootstrap: str, total: int) -> tuple[int, float]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                  "enable.partition.eof": False, "fetch.max.bytes": 50 << 20,
                  "max.partition.fetch.bytes": 8 << 20, "queued.max.messages.kbytes": 1 << 20,
                  # librdkafka otherwise pauses fetching for 1 s whenever its local queue
                  # holds > queued.min.messages (a client-side stall, the same on real Kafka)
                  "queued.min.messages": 2_000_000, "fetch.queue.backoff.ms": 1})
    c.assign([TopicPartition("ingest-wire", 0, 0)])
    n = 0
    t0 = time.perf_counter()
    while n < total:
        msgs = c.consume(10000, 10)
        if not msgs:
            raise RuntimeError("consumer stalled")
        n += len(msgs)
    dt = time.perf_counter() - t0
    c.close()
    return n, dt


def process_consume(cmd: list[str]) -> float:
    """Seconds a consumer process takes to read the whole topic to /dev/null."""
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, timeout=600, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


class WireProfile:
    """Where a wire consumer's time goes, per fetch: from its request sent to the first byte
    of the answer (the broker woken and handling the Fetch), and the answer's own
    streaming rate once it flows (the sendfile path proper)."""

    def __init__(self) -> None:
        self.first_byte: list[float] = []
        self.stream: list[float] = []  # MB/s from the first byte to the last

    def line(self) -> str:
        if not self.first_byte:
            return ""
        return (f"; per fetch: {statistics.median(self.first_byte) * 1e3:.2f} ms to the first "
                f"byte, then {statistics.median(self.stream):,.0f} MB/s (medians)")


def wire_consume(bootstrap: str, end_offset: int, profile: WireProfile | None = None
                 ) -> tuple[int, float]:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    buf = bytearray(2 * WIRE_PARTITION_BYTES)
    view = memoryview(buf)
    offset, total_bytes, cid = 0, 0, 0
    t0 = time.perf_counter()
    while offset < end_offset:
        cid += 1
        sock.sendall(codec.encode_request(ApiKey.FETCH, 12, cid, "bench", {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 16 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                {"topic": "ingest-wire", "partitions": [
                    {"partition": 0, "fetch_offset": offset,
                     "partition_max_bytes": WIRE_PARTITION_BYTES, "current_leader_epoch": -1,
                     "log_start_offset": -1, "last_fetched_epoch": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""}))
        asked = time.perf_counter()
        got = sock.recv_into(view[:4])
        first = time.perf_counter()
        while got < 4:
            got += sock.recv_into(view[got:4])
        size = int.from_bytes(buf[:4], "big") + 4
        if size > len(buf):
            buf = bytearray(size)
            view = memoryview(buf)
            buf[:4] = size.to_bytes(4, "big")
        while got < size:
            got += sock.recv_into(view[got:size])
        if profile is not None:
            profile.first_byte.append(first - asked)
            profile.stream.append(size / max(time.perf_counter() - first, 1e-9) / 1e6)
        resp = codec.decode_response(ApiKey.FETCH, 12, view[4:size])
        records = resp["responses"][0]["partitions"][0]["records"]
        # Skip to the last complete batch's end by walking headers (no record parsing).
        mv = memoryview(records) if records is not None else memoryview(b"")
        pos = 0
        while pos + 12 <= len(mv):
            base = int.from_bytes(mv[pos:pos + 8], "big")
            length = int.from_bytes(mv[pos + 8:pos + 12], "big")
            if pos + 12 + length > len(mv):
                break
            last_delta = int.from_bytes(mv[pos + 23:pos + 27], "big")
            offset = base + last_delta + 1
            pos += 12 + length
        total_bytes += size
    dt = time.perf_counter() - t0
    sock.close()
    return total_bytes, dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--pairs", type=int, default=5,
                    help="wire consumer and raw sendfile runs, alternating (the ratio is the "
                         "median of the pairs': one run of either swings 25%% here)")
    add_summary_option(ap)
    args = ap.parse_args()
    broker = start_broker()
    try:
        n = fill(broker.bootstrap, args.records)
        paths = sorted(str(p) for p in broker.data_dir.glob("ingest-wire-0/*.log"))
        size = sum(os.path.getsize(p) for p in paths)
        os.sync()  # the fill's dirty pages written back now, not while either side runs
        for p in paths:  # make sure it is page-cached
            with open(p, "rb") as f:
                while f.read(8 << 20):
                    pass
        cpu0 = broker.cpu_seconds()
        wbytes, wdt = wire_consume(broker.bootstrap, n)
        wcpu = broker.cpu_seconds() - cpu0
        wires, raws = [wbytes / wdt / 1e6], [raw_sendfile(paths, WIRE_PARTITION_BYTES)]
        profile = WireProfile()
        for i in range(1, max(1, args.pairs)):  # ABBA: a drift of the machine cancels
            for what in (("raw", "wire") if i % 2 else ("wire", "raw")):
                if what == "raw":
                    raws.append(raw_sendfile(paths, WIRE_PARTITION_BYTES))
                else:
                    b, t = wire_consume(broker.bootstrap, n, profile)
                    wires.append(b / t / 1e6)
        cpu0 = broker.cpu_seconds()
        cn, cdt = librdkafka_consume(broker.bootstrap, n)
        ccpu = broker.cpu_seconds() - cpu0
        kcat = shutil.which("kcat") or shutil.which("kafkacat")
        kdt = process_consume([kcat, "-C", "-b", broker.bootstrap, "-t", "ingest-wire", "-p",
                               "0", "-o", "beginning", "-e", "-q"]) if kcat else None
        pdt = process_consume([sys.executable, "-m", "kafkactl", "consume", "-b",
                               broker.bootstrap, "-t", "ingest-wire", "--from-beginning",
                               "-e", "-q"])
    finally:
        broker.stop()
        shutil.rmtree(broker.data_dir, ignore_errors=True)
    print(f"topic           : {n:,} records of 100 B, {size / 1e6:.0f} MB on disk")
    raw, wire = statistics.median(raws), statistics.median(wires)
    ratio = statistics.median(w / r for w, r in zip(wires, raws, strict=True))
    print(f"raw os.sendfile : {raw:,.0f} MB/s over loopback (median of {len(raws)}: "
          + ", ".join(f"{x:,.0f}" for x in raws) + ")")
    print(f"wire consumer   : {wire:,.0f} MB/s (median of {len(wires)}: "
          + ", ".join(f"{x:,.0f}" for x in wires) + f"); wire/raw = {ratio:.2f} (median of "
          f"the pairs'){profile.line()}; the first run {n / wdt:,.0f} records/s, broker "
          f"CPU {wcpu / wdt * 100:.0f}% of a core")
    print(f"librdkafka      : {cn / cdt:,.0f} records/s, {size / cdt / 1e6:,.0f} MB/s "
          f"(librdkafka/raw = {size / cdt / 1e6 / raw:.2f}); broker CPU "
          f"{ccpu / cdt * 100:.0f}% of a core")
    if kdt is None:
        print("kcat -C         : kcat not installed; skipped")
    else:
        print(f"kcat -C -e      : {n / kdt:,.0f} records/s, {size / kdt / 1e6:,.0f} MB/s "
              f"(whole process)")
    print(f"kafkactl consume: {n / pdt:,.0f} records/s, {size / pdt / 1e6:,.0f} MB/s "
          f"(whole process)")
    write_summary(args.summary_json, [Row(
        "6 keep: fetch", f"wire consumer (Fetch, sendfile path; median of {len(wires)})", wire,
        "MB/s", "raw os.sendfile of the segments (median; ratio: of the pairs')", raw, ratio,
        ">= 0.75x", ratio >= 0.75)])


if __name__ == "__main__":
    main()
