"""Helpers of the tests of members that lose and regain their group membership
(test_rejoin_positions, test_max_poll_interval): real `kafkactl consume -G` processes, the
group as the coordinator describes it, and every commit the group made, in order."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import sys
import termios
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from kafkactl.client.group import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient

# one __consumer_offsets partition: every commit of every group in one log, in order
BROKER = {"group_initial_rebalance_delay_ms": "0", "offsets_topic_num_partitions": "1"}
Offset = tuple[int, int]  # (partition, offset)


def member(bootstrap: str, group: str, topic: str, client_id: str, *extra: str,
           stdout: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    """`kafkactl consume -G group -t topic -o earliest -X client.id=...` (the member ids the
    coordinator gives start with the client id: `a` sorts before `b` for the assignors)."""
    return subprocess.Popen(
        [sys.executable, "-m", "kafkactl", "consume", "-b", bootstrap, "-G", group, "-t",
         topic, "-o", "earliest", "-X", f"client.id={client_id}", *extra],
        stdout=stdout, stderr=subprocess.PIPE)


def describe(bootstrap: str, group: str) -> tuple[str, dict[str, tuple[str, list[Any]]]]:
    """(state, {client id: (member id, assignment)}) of `group`."""
    client = KafkaClient(bootstrap)
    try:
        desc = GroupAdmin(client).describe_group(group)
    finally:
        client.close()
    return desc.state, {m.client_id: (m.member_id, list(m.assignment)) for m in desc.members}


def holds(bootstrap: str, group: str, client_id: str) -> bool:
    """The group is Stable and the member of `client_id` holds partitions."""
    state, members = describe(bootstrap, group)
    return state == "Stable" and bool(members.get(client_id, ("", []))[1])


def committed(bootstrap: str, group: str, topic: str, partitions: Iterable[int]
              ) -> dict[int, int]:
    client = KafkaClient(bootstrap)
    try:
        got = GroupAdmin(client).fetch_offsets(group, [(topic, p) for p in partitions])
    finally:
        client.close()
    return {p: off for (_t, p), off in got.items()}


def commit_history(bootstrap: str, group: str, topic: str) -> dict[int, list[int]]:
    """Every offset `group` committed for `topic`, per partition, in the order the
    coordinator stored them (read back from the single __consumer_offsets partition)."""
    from kafkactl.client.consumer import Consumer
    from kafkactl.log.offsets_decoder import decode_offsets_record

    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    out: dict[int, list[int]] = {}
    try:
        consumer.assign([("__consumer_offsets", 0)])
        consumer.seek_to_beginning()
        end = consumer.end_offsets([("__consumer_offsets", 0)])[("__consumer_offsets", 0)]
        while consumer.position(("__consumer_offsets", 0)) < end:
            for records in consumer.poll(1000).values():
                for r in records:
                    doc = decode_offsets_record(r.offset, r.key, r.value)[2]
                    key, payload = doc.get("key"), doc.get("payload")
                    if not isinstance(key, dict) or key.get("type") not in ("0", "1"):
                        continue
                    data = key["data"]
                    if data["group"] != group or data["topic"] != topic:
                        continue
                    if isinstance(payload, dict):
                        out.setdefault(data["partition"], []).append(
                            payload["data"]["offset"])
    finally:
        consumer.close()
    return out


def produce(bootstrap: str, topic: str, partition: int, start: int, n: int,
            size: int = 0) -> None:
    """Records `start`..`start+n-1` into `partition` (values of `size` bytes, else the
    number)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                  "message.max.bytes": max(1_000_000, size + 10_000)})
    for i in range(start, start + n):
        p.produce(topic, value=(b"x" * size if size else b"%d" % i), partition=partition)
    assert p.flush(60) == 0


def offsets_of(data: bytes) -> list[Offset]:
    """(partition, offset) of each whole line `%p %o ...` of a member's output."""
    lines = data.split(b"\n")[:-1]
    return [(int(f[0]), int(f[1])) for f in (line.split(b" ", 2) for line in lines)]


def lines_from(data: bytes, start: int) -> bytes:
    """The lines of `data` that begin at or after byte `start` (a line written partly
    before it belongs to what came before)."""
    if start == 0 or data[start - 1:start] == b"\n":
        return data[start:]
    nxt = data.find(b"\n", start)
    return b"" if nxt < 0 else data[nxt + 1:]


def unread(stream: IO[bytes]) -> int:
    """The bytes a pipe holds that its reader has not taken."""
    raw = fcntl.ioctl(stream.fileno(), termios.FIONREAD, b"\0" * 4)
    return int.from_bytes(raw, sys.byteorder)


def pipe_full(stream: IO[bytes]) -> bool:
    """The writer filled the pipe: what it holds is within two pages of its size, or the
    pipe takes no more (no write would go in: its pages are full, as they are with less
    than its size when the writes are smaller than a page, a poll of 500 short lines).
    Asked of a write description of the pipe of our own (Linux: /proc/self/fd)."""
    size = fcntl.fcntl(stream.fileno(), fcntl.F_GETPIPE_SZ)
    if unread(stream) >= size - 3 * 4096:
        return True
    fd = os.open(f"/proc/self/fd/{stream.fileno()}", os.O_WRONLY | os.O_NONBLOCK)
    try:
        return not select.select([], [fd], [], 0)[1]
    finally:
        os.close(fd)


def read_file(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def non_decreasing(values: list[int]) -> bool:
    return all(a <= b for a, b in zip(values, values[1:], strict=False))


FAST_SESSION = ["-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=1000",
                "-X", "auto.commit.interval.ms=500"]


def stop_members(*procs: subprocess.Popen[bytes]) -> list[str]:
    """SIGINT (Ctrl-C) each member, then wait for it; their stderr."""
    errs = []
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            _out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            _out, err = p.communicate()
        errs.append(err.decode(errors="replace"))
    return errs
