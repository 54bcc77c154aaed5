"""The network layer under hostile load, against a real `kafkactl serve` subprocess started by
this module's own fixture (it can put an address-space limit, RLIMIT_AS, on the broker, the
way a container memory limit would) and raw sockets:

- size prefixes alone (20 x "104857600 and two bytes") allocate nothing: the broker survives
  a 1 GiB limit and a normal client produces and consumes meanwhile;
- bytes really sent are capped by queued.max.request.bytes, and requests that never finish
  are closed after socket.request.read.timeout.ms;
- 2,000 idle connections cost at most 16 KiB of RSS each;
- max.connections.per.ip refuses with a log line naming peer and limit (max.connections
  makes new connections wait instead: tests/broker/test_max_connections.py).

Memory figures come from /proc/PID/status (VmRSS, VmHWM = peak RSS) and are printed (-s).
"""

from __future__ import annotations

import os
import resource
import select
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests.conftest import free_port as _free_port
from tests.polling import wait_until

from .wire import Wire

MiB = 1024 * 1024
API_VERSIONS_V0 = codec.encode_request(ApiKey.API_VERSIONS, 0, 1, "t", {})


@dataclass
class LimitedBroker:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def status_kib(self, field: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise KeyError(field)

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def alive(self) -> bool:
        return self.proc.poll() is None


def _wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    wait_until(check, timeout, what)


@pytest.fixture
def limited_broker(tmp_path: Path) -> Iterator[Callable[..., LimitedBroker]]:
    """start(overrides, address_space=bytes or None): a broker with RLIMIT_AS set in the child
    before exec. Readiness is its "started" log line (no probe connection to count)."""
    started: list[LimitedBroker] = []

    def start(overrides: dict[str, str] | None = None, *,
              address_space: int | None = None) -> LimitedBroker:
        port = _free_port()
        data = tmp_path / f"data-{len(started)}"
        args = [sys.executable, "-m", "kafkactl", "serve", "--data-dir", str(data),
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"]
        for key, value in (overrides or {}).items():
            args += ["--override", f"{key}={value}"]

        def limit() -> None:
            if address_space is not None:
                resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

        log_path = tmp_path / f"broker-{port}.log"
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                    preexec_fn=limit)
        b = LimitedBroker(proc, port, log_path)
        started.append(b)
        _wait_for("the broker to start", lambda: "started:" in b.log() or not b.alive(), 30)
        assert b.alive(), b.log()
        return b

    yield start
    for b in started:
        if b.alive():
            b.proc.kill()
        b.proc.wait()


def _round_trip(b: LimitedBroker, times: int = 2) -> None:
    """ApiVersions round trips on a fresh connection. Two in a row also mean the event loop
    has run every read callback that was ready before our first request arrived."""
    with Wire(b.bootstrap, timeout=30) as w:
        for _ in range(times):
            resp = w.request(ApiKey.API_VERSIONS, 0, {})
            assert resp["error_code"] == 0


def _closed_by_peer(s: socket.socket, timeout: float) -> bool:
    """True once the broker has closed `s` (EOF or reset), False after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([s], [], [], 0.2)
        if ready:
            try:
                if s.recv(65536) == b"":
                    return True
            except (ConnectionResetError, BrokenPipeError):
                return True
    return False


def _closed_now(s: socket.socket) -> bool:
    ready, _, _ = select.select([s], [], [], 0)
    if not ready:
        return False
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _produce_and_consume(b: LimitedBroker, topic: str, n: int) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=b.bootstrap, request_timeout_ms=20000)
    futures = [producer.send(topic, f"v{i}".encode()) for i in range(n)]
    producer.flush(30)
    assert [f.get(timeout=30).offset for f in futures] == list(range(n))
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, consumer_timeout_ms=20000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == n:
            break
    consumer.close()
    assert got == [f"v{i}".encode() for i in range(n)]


def test_size_prefixes_allocate_nothing_under_a_memory_limit(limited_broker) -> None:
    b = limited_broker(address_space=1 << 30)
    _round_trip(b)
    hwm0, rss0 = b.status_kib("VmHWM"), b.status_kib("VmRSS")
    attackers = [socket.create_connection(("127.0.0.1", b.port)) for _ in range(20)]
    try:
        for s in attackers:
            s.sendall(struct.pack(">i", 104857600) + b"\0\0")  # 6 bytes each, 120 in all
        _round_trip(b)  # the broker has read every prefix
        _produce_and_consume(b, "meanwhile", 100)  # a normal client, attackers still there
        assert b.alive(), b.log()
        hwm1, rss1 = b.status_kib("VmHWM"), b.status_kib("VmRSS")
        print(f"\n20 x size=104857600+2 bytes under RLIMIT_AS=1 GiB: VmRSS {rss0} -> {rss1} KiB,"
              f" peak {hwm0} -> {hwm1} KiB")
        assert hwm1 - hwm0 < 32 * 1024, (hwm0, hwm1)
        assert not any(map(_closed_now, attackers))  # still open: a legal request so far
    finally:
        for s in attackers:
            s.close()
    log = b.log()
    assert "Traceback" not in log and "MemoryError" not in log, log


def test_queued_max_request_bytes_caps_bytes_really_sent(limited_broker) -> None:
    cap = 16 * MiB
    b = limited_broker({"queued.max.request.bytes": str(cap),
                        "socket.request.read.timeout.ms": "3000"})
    _round_trip(b)
    hwm0 = b.status_kib("VmHWM")
    size, body = 24 * MiB, 20 * MiB  # each announces 24 MiB and sends 20 of them
    attackers = [socket.create_connection(("127.0.0.1", b.port)) for _ in range(8)]
    chunk = b"\x01" * MiB
    sent = [0] * len(attackers)
    try:
        for s in attackers:
            s.sendall(struct.pack(">i", size))
            s.setblocking(False)
        # Push until every body is out or the broker stops taking bytes (paused, then the
        # read deadline closes the connection).
        deadline = time.monotonic() + 60
        open_ = set(range(len(attackers)))
        while open_ and time.monotonic() < deadline:
            _, writable, _ = select.select([], [attackers[i] for i in open_], [], 0.2)
            for s in writable:
                i = attackers.index(s)
                try:
                    sent[i] += s.send(chunk[:min(len(chunk), body - sent[i])])
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    open_.discard(i)
                    continue
                if sent[i] >= body:
                    open_.discard(i)
        for s in attackers:
            s.setblocking(True)
            assert _closed_by_peer(s, 60), "an incomplete request was never closed"
        _produce_and_consume(b, "after", 50)
        hwm1 = b.status_kib("VmHWM")
    finally:
        for s in attackers:
            s.close()
    print(f"\n8 x 24 MiB requests, {sum(sent) // MiB} MiB really sent, "
          f"queued.max.request.bytes=16 MiB: peak RSS {hwm0} -> {hwm1} KiB")
    assert sum(sent) > 2 * cap  # the attack pushed well past the cap
    # The cap plus the one request allowed to finish past it, plus slack.
    assert hwm1 - hwm0 < (cap + size + 32 * MiB) // 1024, (hwm0, hwm1)
    log = b.log()
    assert "queued.max.request.bytes" in log
    assert "socket.request.read.timeout.ms" in log
    assert "Traceback" not in log, log
    assert b.alive()


def test_a_request_trickling_in_is_closed_at_the_read_deadline(limited_broker) -> None:
    b = limited_broker({"socket.request.read.timeout.ms": "1500"})
    with socket.create_connection(("127.0.0.1", b.port)) as s:
        s.sendall(struct.pack(">i", 1000) + b"\0" * 10)
        closed = False
        deadline = time.monotonic() + 30
        while not closed and time.monotonic() < deadline:
            closed = _closed_by_peer(s, 0.1)  # wait a little for the broker, then ...
            if not closed:
                try:
                    s.sendall(b"\0")  # ... one more byte: never idle, never complete
                except OSError:
                    closed = True
        assert closed, "a request trickling in for 30 s was never closed"
    _round_trip(b)  # everyone else is served
    assert "socket.request.read.timeout.ms" in b.log()


def test_a_size_prefix_over_socket_request_max_bytes_closes_with_a_log_line(
        limited_broker) -> None:
    b = limited_broker({"socket.request.max.bytes": "1000000"})
    with socket.create_connection(("127.0.0.1", b.port)) as s:
        s.sendall(struct.pack(">i", 1000001) + b"\0\0")
        assert _closed_by_peer(s, 30)
    _round_trip(b)
    assert "1000001" in b.log() and "socket.request.max.bytes" in b.log()


def _raise_nofile(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"needs {need} open files; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def test_idle_connections_cost_at_most_16_kib_each(limited_broker) -> None:
    n = 2000
    _raise_nofile(2 * n + 4096 + 512)  # our sockets, and the broker's (it inherits it)
    b = limited_broker()
    fds0 = b.open_fds()  # before any connection (a closed one may linger a moment)
    _round_trip(b)
    rss0 = b.status_kib("VmRSS")
    conns: list[socket.socket] = []
    try:
        while len(conns) < n:  # in steps the listen backlog (1024) always has room for
            for _ in range(min(500, n - len(conns))):
                conns.append(socket.create_connection(("127.0.0.1", b.port)))
            _wait_for(f"the broker to accept {len(conns)} connections",
                      lambda: b.open_fds() >= fds0 + len(conns))
        _round_trip(b)  # accepted after all of them: every one is in
        rss1 = b.status_kib("VmRSS")
        # Then each one sends a request and reads the answer, and goes idle again.
        for s in conns:
            s.sendall(API_VERSIONS_V0)
        for s in conns:
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            assert len(s.recv(size, socket.MSG_WAITALL)) == size
        _round_trip(b)
        rss2 = b.status_kib("VmRSS")
    finally:
        for s in conns:
            s.close()
    accepted = (rss1 - rss0) / n
    after_request = (rss2 - rss0) / n
    print(f"\n{n} idle connections: {accepted:.1f} KiB RSS each just accepted, "
          f"{after_request:.1f} KiB each after one request")
    assert accepted <= 16, (rss0, rss1)
    assert after_request <= 16, (rss0, rss2)


def _refused(s: socket.socket) -> bool:
    """The broker closed `s` right after accept (before any request)."""
    return _closed_by_peer(s, 10)


def _served(s: socket.socket) -> bool:
    s.sendall(API_VERSIONS_V0)
    header = s.recv(4, socket.MSG_WAITALL)
    return len(header) == 4


def test_max_connections_per_ip_and_its_overrides(limited_broker) -> None:
    b = limited_broker({"max.connections.per.ip": "2",
                        "max.connections.per.ip.overrides": "127.0.0.3:0"})
    addr = ("127.0.0.1", b.port)
    first = [socket.create_connection(addr) for _ in range(2)]
    try:
        for s in first:
            assert _served(s)
        third = socket.create_connection(addr)
        peer = f"127.0.0.1:{third.getsockname()[1]}"
        assert _refused(third)
        third.close()
        # Another address is not limited by 127.0.0.1's connections.
        with socket.create_connection(addr, source_address=("127.0.0.2", 0)) as other:
            assert _served(other)
        with socket.create_connection(addr, source_address=("127.0.0.3", 0)) as blocked:
            blocked_peer = f"127.0.0.3:{blocked.getsockname()[1]}"
            assert _refused(blocked)
        _wait_for("the refusal lines", lambda: blocked_peer in b.log())
        lines = b.log().splitlines()
        line = next(li for li in lines if f"refused connection from {peer}" in li)
        assert "max.connections.per.ip is 2" in line, line
        line = next(li for li in lines if f"refused connection from {blocked_peer}" in li)
        assert "max.connections.per.ip.overrides is 0" in line, line
    finally:
        for s in first:
            s.close()


def test_an_idle_connection_closes_after_connections_max_idle_ms(limited_broker) -> None:
    b = limited_broker({"connections.max.idle.ms": "1000"})
    with socket.create_connection(("127.0.0.1", b.port)) as s:
        assert _served(s)
        assert _closed_by_peer(s, 30)
    _round_trip(b)
    assert "connections.max.idle.ms" in b.log()
