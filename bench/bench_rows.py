"""Shared by the issue-20 scale benches: raw Kafka requests over a socket, percentiles,
process RSS/fds, and the rows `--summary-json` writes for a run_all script."""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from pathlib import Path
from typing import Any

_SIZE = struct.Struct(">i")


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))] if s else float("nan")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def recv_frame(s: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        head += chunk
    size = _SIZE.unpack(head)[0]
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = s.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("the broker closed the connection")
        got += n
    return bytes(buf)


def call(s: socket.socket, api_key: int, version: int, body: dict[str, Any],
         correlation_id: int = 1) -> dict[str, Any]:
    """Send one request and decode its response."""
    from kafkactl.protocol.codec import decode_response, encode_request

    s.sendall(encode_request(api_key, version, correlation_id, "bench", body))
    return decode_response(api_key, version, recv_frame(s))


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def create_topics_body(topics: list[tuple[str, int]], timeout_ms: int = 600_000
                       ) -> dict[str, Any]:
    return {"topics": [{"name": n, "num_partitions": p, "replication_factor": 1,
                        "assignments": [], "configs": []} for n, p in topics],
            "timeout_ms": timeout_ms, "validate_only": False}


def row(goal: str, figure: str, value: float, unit: str, target: str, *,
        baseline: str = "", baseline_value: float | None = None) -> dict[str, Any]:
    ratio = (value / baseline_value) if baseline_value else None
    return {"goal": goal, "figure": figure, "value": value, "unit": unit,
            "baseline": baseline, "baseline_value": baseline_value, "ratio": ratio,
            "target": target}


def print_rows(rows: list[dict[str, Any]]) -> None:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n(load average {load} on {os.cpu_count()} cores: the machine is shared)")
    print(f"{'figure':46} {'value':>14} {'baseline':>30} {'ratio':>7}  goal")
    for r in rows:
        base = (f"{r['baseline']} {r['baseline_value']:.4g}"
                if r["baseline_value"] is not None else r["baseline"] or "-")
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        print(f"{r['figure']:46} {r['value']:>10.4g} {r['unit']:<3} {base:>30} {ratio:>7}  "
              f"{r['target']}")


def write_summary(path: str | None, rows: list[dict[str, Any]]) -> None:
    if path:
        Path(path).write_text(json.dumps(rows, indent=1))


def wait_until(pred: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)
