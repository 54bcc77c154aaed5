"""Small requests: many producer processes sending one record per Produce request
(linger.ms=0) to one `kafkactl serve`; the broker's CPU per request is the figure to watch.

Phases, all in one run (each phase: its own clients, CPU sampled over the same window):
- echo   a bare asyncio server answering each Kafka-framed request with a small response
         (what the event loop and the socket cost, nothing else), driven by raw-socket
         clients that each keep one Produce request in flight;
- net    kafkactl's network layer (broker/network.py's SocketServer) with a handler that
         answers every frame with the echo server's response: what the framing, backlog
         and write path cost before any request is decoded (net/echo), driven the same way;
- raw    the same raw-socket clients and the same Produce frames against the broker:
         broker/echo is the broker's own cost, broker - net what handling a Produce costs;
- acks1, acksall   confluent-kafka producers (linger.ms=0, one record per request, each
         process keeping `--window` records outstanding), acks=1 and acks=all;
- hot    the broker's request handler called in a loop in one process with the raw phase's
         frame (no socket, caches warm): its code's own cost, beside the raw phase's;
- paced  one raw-socket client at each of `--paced-rates` requests/s (sleeping between
         them), echo server then broker: the CPU a request costs a server that idles
         between requests (this machine's VMs: ~5x the saturated figure, echo and broker
         alike), beside the saturated phases' figures;
- latency  confluent-kafka producers paced to half the one-core capacity for their own
         requests, as the acks1 phase measured it (1e6 / 2 / broker µs per request; the
         raw phase's when acks1 did not run; `--rate` sets it): p50/p99 of produce() ->
         delivery report (librdkafka's msg.latency()).

Requests/s depend on how many cores the clients leave the server (2 cores here, shared):
compare the server µs of CPU per request, and the ratios. On a shared machine one window
says little (the same code measures 90-150 µs as other jobs come and go, the echo server
15-25 µs): `--rounds N` alternates the echo and raw phases N times (the servers stay up)
and reports the best and the median of each, with the load average. `--kafkactl DIR` runs
the broker from another checkout (PYTHONPATH=DIR); given more than once, each checkout's
broker takes its raw phase in every round, in alternating order (before/after in the same
conditions; the confluent-kafka phases use the first).

    python bench/small_requests.py [--producers 20] [--seconds 5] [--rate N] [--rounds 1]
                                   [--phases echo,net,raw,hot,paced,acks1,acksall,latency]
                                   [--kafkactl DIR]...
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing as mp
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from broker_common import Broker, free_port, start_broker
from summary import Row, add_summary_option, write_summary

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "small"
GOAL = "2 small requests"
VALUE = b"v" * 100
PRODUCE_VERSION = 9
WARMUP = 1.5
_SIZE = struct.Struct(">i")


def process_cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def process_runtime_seconds(pid: int) -> float:
    """CPU seconds of process `pid`'s threads so far, to the nanosecond (the scheduler's
    sum_exec_runtime; /proc/PID/stat counts whole 10 ms ticks, too coarse for a server that
    spends 2% of a core); the tick count where /proc/PID/task/*/sched is not there."""
    total = 0.0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            for row in (task / "sched").read_text().splitlines():
                if row.startswith("se.sum_exec_runtime"):
                    total += float(row.split(":")[1]) / 1000
    except OSError:
        return sum(process_cpu_seconds(pid))
    return total or sum(process_cpu_seconds(pid))


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))] if s else float("nan")


# ---------------------------------------------------------------- the echo baseline server
class _Echo(asyncio.Protocol):
    """Kafka framing only: each size-prefixed request gets a 40-byte response carrying its
    correlation id (about the size of a one-partition Produce response)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        out = []
        while len(buf) >= 4:
            (size,) = _SIZE.unpack_from(buf)
            if len(buf) < 4 + size:
                break
            out.append(b"\x00\x00\x00\x24" + bytes(buf[8:12]) + bytes(32))
            del buf[:4 + size]
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


def echo_server(port: int) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Echo, "127.0.0.1", port, backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class _Canned:
    """The net phase's handler: the echo server's response to every request frame (the
    frame here starts at the API key: the correlation id is bytes 4..8)."""

    def handle(self, conn: Any, frame: bytearray) -> list[bytes]:
        return [b"\x00\x00\x00\x24" + bytes(frame[4:8]) + bytes(32)]


def net_server(port: int) -> None:
    from kafkactl.broker.network import SocketServer

    async def main() -> None:
        server = SocketServer(_Canned(), max_request_size=100 << 20,
                              idle_timeout_ms=600_000)
        await server.start("127.0.0.1", port)
        await asyncio.Event().wait()

    asyncio.run(main())


def hot_handle(requests: int) -> None:
    """(a process of its own) A standalone broker started in this process; its request
    handler called `requests` times in a loop with the raw phase's Produce frame, no
    socket: what handling one costs with the CPU's caches warm (best of 5 loops). Prints
    the µs per request."""
    import tempfile

    from kafkactl.broker.config import BrokerConfig
    from kafkactl.broker.network import ConnectionInfo
    from kafkactl.broker.server import KafkaServer

    async def main() -> None:
        data = tempfile.mkdtemp(prefix="kafkactl-bench-hot-")
        server = KafkaServer(BrokerConfig.build(flags={
            "log.dirs": data, "listeners": "PLAINTEXT://127.0.0.1:0"}, overrides=[]))
        await server.startup()
        try:
            assert server.socket_server is not None
            handler = server.socket_server.handler
            conn = ConnectionInfo(peer="127.0.0.1:1", connection_id=1)
            frame = produce_frame(0, 1)[4:]  # the handler takes frames without the size
            for _ in range(2000):  # the topic auto-created, the code paths warm
                handler.handle(conn, bytearray(frame))
            best = float("inf")
            for _ in range(5):
                t = time.process_time()
                for _ in range(requests):
                    handler.handle(conn, bytearray(frame))
                best = min(best, (time.process_time() - t) / requests)
            print(f"{best * 1e6:.2f}", flush=True)
        finally:
            await server.shutdown()
            import shutil

            shutil.rmtree(data, ignore_errors=True)

    asyncio.run(main())


def start_echo(kind: str = "--echo-server") -> tuple[subprocess.Popen[bytes], int]:
    """The echo server (or, with "--net-server", kafkactl's network layer) in a process of
    its own; kafkactl comes from PYTHONPATH (the first --kafkactl checkout)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, kind, str(port)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{kind[2:]} did not start")


# ------------------------------------------------------------------------ raw-socket client
def produce_frame(partition: int, acks: int) -> bytes:
    from kafkactl.protocol.api_keys import ApiKey
    from kafkactl.protocol.codec import encode_request
    from kafkactl.record.builder import RecordBatchBuilder

    b = RecordBatchBuilder()
    b.append(None, None, VALUE)
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 30000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": partition, "records": b.build()}]}]}
    return encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, 1, "small-requests", body)


def raw_client(port: int, frame: bytes, t0: float, t1: float, out: Any) -> None:
    """One request in flight at a time, back to back; counts the answers received inside
    [t0, t1]."""
    paced_client(port, frame, 0.0, t0, t1, out)


def paced_client(port: int, frame: bytes, rate: float, t0: float, t1: float, out: Any) -> None:
    """One request at a time, at `rate` requests/s (sleeping to each slot: the server idles
    between requests, as a broker does below its capacity), or back to back with rate 0.
    Counts the answers inside [t0, t1]."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(65536)
    view = memoryview(buf)
    done, i, start = 0, 0, time.monotonic()
    while (now := time.monotonic()) < t1:
        if rate:
            delay = start + i / rate - now
            if delay > 0:
                time.sleep(delay)
            i += 1
        s.sendall(frame)
        got = s.recv_into(buf)
        while got < 4 or got < 4 + _SIZE.unpack_from(buf)[0]:
            n = s.recv_into(view[got:])
            if n == 0:
                raise ConnectionError("server closed the connection")
            got += n
        if now >= t0:
            done += 1
    s.close()
    out.put(done)


# ------------------------------------------------------------------ confluent-kafka clients
def ck_saturate(bootstrap: str, partition: int, acks: int, window: int, t0: float, t1: float,
                out: Any) -> None:
    """At most `window` records outstanding; linger.ms=0 and batch.num.messages=1: one
    record per Produce request. Counts the deliveries inside [t0, t1]."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": acks,
                  "batch.num.messages": 1})
    state = [0, 0]  # outstanding, delivered in window

    def delivered(err: Any, msg: Any) -> None:
        state[0] -= 1
        if err is None and t0 <= time.monotonic() <= t1:
            state[1] += 1

    while time.monotonic() < t1:
        while state[0] >= window:
            p.poll(1.0)
        p.produce(TOPIC, VALUE, partition=partition, on_delivery=delivered)
        state[0] += 1
        p.poll(0)
    p.flush(10)
    out.put(state[1])


def ck_paced(bootstrap: str, partition: int, acks: int, rate: float, t0: float, t1: float,
             out: Any) -> None:
    """Sends at `rate` records/s (waiting in poll() to each slot, never spinning); collects
    the produce -> delivery latency of the records sent inside [t0, t1], in ms."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": acks,
                  "batch.num.messages": 1})
    latencies: list[float] = []

    def delivered(err: Any, msg: Any) -> None:
        lat = msg.latency()
        if err is None and lat is not None and msg.key() == b"w":
            latencies.append(lat * 1e3)

    # No collector in this loop (it makes no cycles): a full collection over the heap this
    # process forked from would hold the delivery reports back, and count in their latency.
    gc.freeze()
    gc.disable()
    interval = 1.0 / rate
    start = time.monotonic()
    i = 0
    while (now := time.monotonic()) < t1:
        # Wait for the slot inside poll(), which serves each delivery report as it comes:
        # msg.latency() is read in the callback (now - produce() time), so a report served
        # only at the next send read as the send interval (4.2 ms at 240/s per producer).
        # librdkafka rounds a poll's timeout down to whole ms: the last part is slept.
        while (delay := start + i * interval - time.monotonic()) > 0:
            if delay >= 0.001:
                p.poll(delay)
            else:
                time.sleep(delay)
        now = time.monotonic()
        key = b"w" if t0 <= now else None
        p.produce(TOPIC, VALUE, key=key, partition=partition, on_delivery=delivered)
        i += 1
        p.poll(0)
    p.flush(10)
    out.put(latencies)


# ---------------------------------------------------------------------------- the phases
CLIENT_NICE = 0


def _niced(target: Any, *args: Any) -> None:
    os.nice(CLIENT_NICE)
    target(*args)


def run_clients(target: Any, args_for: Any, n: int, server_pid: int,
                seconds: float, precise: bool = False) -> tuple[list[Any], tuple[float, float]]:
    """Start n client processes over one window; returns their results and the server's
    (user, system) CPU seconds inside the window ((0, total) with `precise`:
    process_runtime_seconds)."""
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    t0 = time.monotonic() + WARMUP + 0.05 * n
    t1 = t0 + seconds
    procs = [ctx.Process(target=_niced, args=(target, *args_for(i), t0, t1, out)) for i in range(n)]
    for p in procs:
        p.start()
    time.sleep(max(0.0, t0 - time.monotonic()))
    cpu0 = (0.0, process_runtime_seconds(server_pid)) if precise else \
        process_cpu_seconds(server_pid)
    time.sleep(max(0.0, t1 - time.monotonic()))
    cpu1 = (0.0, process_runtime_seconds(server_pid)) if precise else \
        process_cpu_seconds(server_pid)
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    return results, (cpu1[0] - cpu0[0], cpu1[1] - cpu0[1])


def create_topic(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        f.result(30)


def line(name: str, requests: int, seconds: float, cpu: tuple[float, float],
         extra: str = "") -> float:
    rate = requests / seconds
    total = cpu[0] + cpu[1]
    us = total / requests * 1e6 if requests else float("nan")
    user = f"{cpu[0] / requests * 1e6:5.1f}" if requests and cpu[0] else "  n/a"
    print(f"{name:<9} {rate:>10,.0f} req/s  server {us:6.1f} µs CPU/req (user {user})  "
          f"({total / seconds * 100:3.0f}% of a core){extra}", flush=True)
    return us


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def spread(values: list[float]) -> str:
    return f"best {min(values):.1f}, median {statistics.median(values):.1f} of {len(values)}"


def hot_phase(checkout: Path, live_us: float | None) -> list[Row]:
    """The broker's request handler in a loop in one process (hot_handle), beside the raw
    phase's live figure: how much of a live request's cost is its code and how much that
    code running cold (after the event loop, the socket and other connections)."""
    r = subprocess.run([sys.executable, __file__, "--hot-handle", "100000"],
                       env={**os.environ, "PYTHONPATH": str(checkout)}, capture_output=True,
                       text=True, timeout=600, check=True)
    us = float(r.stdout.split()[-1])
    print(f"hot       handling a one-record Produce in a loop, no socket: {us:.1f} µs"
          + (f" (the raw phase's broker, live: {live_us:.1f} µs)" if live_us else ""),
          flush=True)
    return [Row(GOAL, "broker's request handler on a one-record Produce, in a loop "
                      "(caches warm, no socket)", us, "µs",
                "the raw phase's broker CPU per request" if live_us else "", live_us,
                us / live_us if live_us else None, target="report")]


def paced_phase(echo: tuple[subprocess.Popen[bytes], int], broker: Broker, frame: bytes,
                rates: list[float], secs: float) -> list[Row]:
    """The same requests from one client at a steady rate, echo server then broker: what a
    request costs a server that idles between requests (CPU caches and branch predictors
    cold, the wake-up of an idle process), against the saturated phases above."""
    rows = []
    for rate in rates:
        us = []
        for pid, port, name in ((echo[0].pid, echo[1], "echo"),
                                (broker.proc.pid, broker.port, "broker")):
            res, cpu = run_clients(paced_client, lambda i, p=port, r=rate: (p, frame, r), 1, pid,
                                   secs, precise=True)
            us.append(line(f"{name} {rate:g}/s", sum(res), secs, cpu))
        print(f"{'':9} at {rate:,.0f} req/s: broker/echo {us[1] / us[0]:.2f}x", flush=True)
        rows.append(Row(GOAL, f"broker CPU per one-record Produce at {rate:,.0f} req/s "
                              "(one paced client, acks=1)", us[1], "µs",
                        f"echo server at {rate:,.0f} req/s", us[0], us[1] / us[0],
                        target="report (the cost of a request to an idling server)"))
    return rows


def main() -> None:  # noqa: C901
    ap = argparse.ArgumentParser()
    ap.add_argument("--producers", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rate", type=int, default=0,
                    help="the latency phase's requests/s (default: half the one-core capacity "
                         "the raw phase measured, else 10,000)")
    ap.add_argument("--window", type=int, default=1,
                    help="records each confluent-kafka producer keeps outstanding")
    ap.add_argument("--phases", default="echo,net,raw,hot,paced,acks1,acksall,latency")
    ap.add_argument("--paced-rates", default="100,1000,5000",
                    help="the paced phase's requests/s (one client, one request at a time)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate the echo and raw phases this many times; report the "
                         "best and the median of each")
    ap.add_argument("--kafkactl", type=Path, action="append", default=None,
                    help="checkout to run the broker from (before/after rounds); repeat it "
                         "to compare checkouts in the same rounds")
    ap.add_argument("--client-nice", type=int, default=0,
                    help="run the clients at this niceness (profiling: fewer preemptions "
                         "of the server inside its send())")
    ap.add_argument("--echo-server", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--net-server", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--hot-handle", type=int, help=argparse.SUPPRESS)
    add_summary_option(ap)
    args = ap.parse_args()
    global CLIENT_NICE
    CLIENT_NICE = args.client_nice
    if args.echo_server:
        echo_server(args.echo_server)
        return
    if args.net_server:
        net_server(args.net_server)
        return
    if args.hot_handle:
        hot_handle(args.hot_handle)
        return
    phases = args.phases.split(",")
    n, secs, rounds = args.producers, args.seconds, max(1, args.rounds)
    checkouts: list[Path] = [d.resolve() for d in (args.kafkactl or [ROOT])]
    print(f"{n} producer processes, {secs:g} s per phase, {rounds} round(s), broker from "
          f"{', '.join(map(str, checkouts))}; {load()}")
    rows: list[Row] = []
    echo: tuple[subprocess.Popen[bytes], int] | None = None
    net: tuple[subprocess.Popen[bytes], int] | None = None
    brokers: list[Broker] = []
    echo_runs: list[float] = []
    net_runs: list[float] = []
    capacity = 0.0  # requests/s one core sustains (the raw phase of the first checkout)
    ck_capacity = 0.0  # the same for confluent-kafka's acks=1 requests (the acks1 phase)
    raw_runs: list[list[float]] = [[] for _ in checkouts]
    try:
        if "echo" in phases:
            echo = start_echo()
        for d in checkouts:
            os.environ["PYTHONPATH"] = str(d)
            if net is None and "net" in phases:
                net = start_echo("--net-server")
            brokers.append(start_broker())
            create_topic(brokers[-1].bootstrap, n)
        frames = [produce_frame(i, 1) for i in range(n)]
        for r in range(rounds):
            tag = f" r{r + 1}" if rounds > 1 else ""
            if echo is not None:
                proc, port = echo
                res, cpu = run_clients(raw_client, lambda i, p=port: (p, frames[0]), n, proc.pid,
                                       secs)
                echo_runs.append(line("echo" + tag, sum(res), secs, cpu))
            if net is not None:
                proc, port = net
                res, cpu = run_clients(raw_client, lambda i, p=port: (p, frames[i]), n,
                                       proc.pid, secs)
                net_runs.append(line("net" + tag, sum(res), secs, cpu))
            if "raw" in phases:
                order = list(range(len(checkouts)))
                for k in order if r % 2 == 0 else order[::-1]:
                    b = brokers[k]
                    res, cpu = run_clients(raw_client, lambda i, b=b: (b.port, frames[i]), n,
                                           b.proc.pid, secs)
                    name = "raw" + (f"[{k + 1}]" if len(checkouts) > 1 else "") + tag
                    raw_runs[k].append(line(name, sum(res), secs, cpu))
        echo_us = min(echo_runs) if echo_runs else None
        if rounds > 1:
            print(f"after {rounds} rounds ({load()}):")
            if echo_runs:
                print(f"  echo     {spread(echo_runs)} µs CPU/req")
            if net_runs:
                print(f"  net      {spread(net_runs)} µs CPU/req  ({checkouts[0]})")
        if net_runs and echo_us is not None:
            print(f"{'':9} network layer/echo CPU per request: {min(net_runs) / echo_us:.2f}x"
                  + (" (best of each)" if rounds > 1 else ""))
        for k, runs in enumerate(raw_runs):
            if not runs:
                continue
            us = min(runs)
            if rounds > 1:
                print(f"  raw      {spread(runs)} µs CPU/req  ({checkouts[k]})")
            if echo_us is not None:
                print(f"{'':9} broker/echo CPU per request: {us / echo_us:.2f}x"
                      + (" (best of each)" if rounds > 1 else "")
                      + (f"  ({checkouts[k]})" if len(checkouts) > 1 else ""))
            if net_runs:
                print(f"{'':9} handling a Produce (broker - net): {us - min(net_runs):.1f} µs"
                      + (f"  ({checkouts[k]})" if len(checkouts) > 1 else ""))
            if k == 0:
                capacity = 1e6 / us
                ratio = us / echo_us if echo_us else None
                rows.append(Row(GOAL, "broker CPU per one-record Produce (raw clients, acks=1)",
                                us, "µs", "bare asyncio echo server", echo_us, ratio,
                                "<= 2.5x", None if ratio is None else ratio <= 2.5))
        if echo_us is not None:
            rows.insert(0, Row(GOAL, "bare asyncio echo server: CPU per request", echo_us,
                               "µs", target="(the event loop's own cost)"))
        if net_runs:
            net_us = min(net_runs)
            rows.insert(1, Row(GOAL, "kafkactl's network layer, canned answers: CPU per request",
                               net_us, "µs", "bare asyncio echo server" if echo_us else "",
                               echo_us, net_us / echo_us if echo_us else None,
                               target="(framing and writes, no request handled)"))
        if "hot" in phases:
            rows += hot_phase(checkouts[0], min(raw_runs[0]) if raw_runs[0] else None)
        if "paced" in phases and echo is not None:
            rows += paced_phase(echo, brokers[0], frames[0],
                                [float(r) for r in args.paced_rates.split(",")], secs)
        for server in (echo, net):
            if server is not None:
                server[0].terminate()
                server[0].wait()
        echo = net = None
        broker = brokers[0]
        pid = broker.proc.pid
        for name, acks in (("acks1", 1), ("acksall", -1)):
            if name in phases:
                res, cpu = run_clients(
                    ck_saturate, lambda i, a=acks: (broker.bootstrap, i, a, args.window),
                    n, pid, secs)
                cus = line(name, sum(res), secs, cpu)
                if acks == 1 and cus > 0:
                    ck_capacity = 1e6 / cus
                ratio = cus / echo_us if echo_us else None
                rows.append(Row(GOAL, f"broker CPU per request, confluent-kafka {name}", cus,
                                "µs", "bare asyncio echo server" if echo_us else "", echo_us,
                                ratio, "<= 2.5x", None if ratio is None else ratio <= 2.5))
        if "latency" in phases:
            # the goal's rate: half of what one core sustains of these very requests
            # (confluent-kafka, acks=1: the acks1 phase; the raw phase's frames cost the
            # broker less, so half its capacity was ~80% of theirs), else --rate
            capacity = ck_capacity or capacity
            rate = args.rate or (int(capacity / 2) if capacity else 10_000)
            per = rate / n
            res, cpu = run_clients(
                ck_paced, lambda i: (broker.bootstrap, i, 1, per), n, pid, secs)
            lat = [x for r in res for x in r]
            line("latency", len(lat), secs, cpu,
                 f"  p50 {percentile(lat, 0.5):.2f} ms  p99 {percentile(lat, 0.99):.2f} ms"
                 f"  (acks=1, {rate:,}/s asked)")
            p99 = percentile(lat, 0.99)
            at = f"{rate:,} req/s" + ("" if args.rate else ", half the one-core capacity")
            rows.append(Row(GOAL, f"produce p99 at {at} (acks=1, linger.ms=0)",
                            p99, "ms", target="<= 5 ms", met=p99 <= 5))
    finally:
        for server in (echo, net):
            if server is not None:
                server[0].terminate()
                server[0].wait()
        for b in brokers:
            b.stop()
    write_summary(args.summary_json, rows)


if __name__ == "__main__":
    main()
