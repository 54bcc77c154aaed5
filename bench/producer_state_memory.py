"""Broker RSS for N distinct idempotent producer ids (issue 11.5): one Produce v9 request
per id (a 1-record batch with its own producer id, sequence 0), pipelined on one socket,
then the broker's VmRSS next to its RSS before. Run it on two trees to compare.

    PYTHONPATH=. python bench/producer_state_memory.py [--ids 200000]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import time
from pathlib import Path

from broker_common import start_broker

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.batch import RecordBatchBuilder


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def request(pid: int, cid: int) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=0)
    b.append(int(time.time() * 1000), None, b"v")
    return codec.encode_request(ApiKey.PRODUCE, 9, cid, "pids", {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "pids", "partition_data": [{"index": 0, "records": b.build()}]}]})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", type=int, default=200_000)
    args = ap.parse_args()
    broker = start_broker()
    try:
        sock = socket.create_connection(("127.0.0.1", broker.port))
        rfile = sock.makefile("rb")

        def read_one() -> None:
            size = int.from_bytes(rfile.read(4), "big")
            rfile.read(size)

        sock.sendall(request(1_000_000_000, 0))
        read_one()  # creates the topic
        time.sleep(1)
        before = rss_kib(broker.proc.pid)
        t0 = time.perf_counter()
        window = 200
        sent = 0
        for i in range(args.ids):
            sock.sendall(request(i, i + 1))
            sent += 1
            if sent >= window:
                read_one()
                sent -= 1
        while sent:
            read_one()
            sent -= 1
        dt = time.perf_counter() - t0
        time.sleep(1)
        after = rss_kib(broker.proc.pid)
        sock.close()
    finally:
        broker.stop()
        shutil.rmtree(broker.data_dir, ignore_errors=True)
    print(f"{args.ids:,} producer ids in {dt:.1f} s: broker RSS {before / 1024:.0f} MiB -> "
          f"{after / 1024:.0f} MiB (+{(after - before) / 1024:.0f} MiB, "
          f"{(after - before) * 1024 / args.ids:.0f} bytes per id)")


if __name__ == "__main__":
    main()
