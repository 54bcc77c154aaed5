"""The cluster's controller and admin path, each figure against a baseline measured in the
same run (issue 31):

1. UpdateMetadata bytes per ISR change at 1,000 and 10,000 partitions (3 brokers, RF 3),
   from the request builder and the real codec, no broker running: before = the full
   request the controller sent each broker on every ISR change, after = the incremental
   one; also the controller's CPU to build and encode them and a broker's to apply them;
2. the same on a real 3-broker cluster at 1,000 partitions: broker 3 sits behind a counting
   proxy (it advertises the proxy's port, so the controller reaches it through it, and every
   UpdateMetadata passing is decoded): the full one it gets when it rejoins (restarted) vs
   the one of an ISR change (it is paused past replica.lag.time.max.ms: the leader of the
   partition it follows shrinks the ISR, then grows it when it resumes);
3. CreateTopics and CreatePartitions latency on the 3-broker cluster (p50/p99 over N
   operations; the broker answers once its metadata shows the leaders) vs the same
   operations on a standalone broker;
4. leaderless time after a ZooKeeper outage past the session timeout: ZooKeeper stopped,
   every broker paused (so the restarted server expires their sessions, as a longer outage
   would), ZooKeeper started; once the sessions are gone the brokers resume: time until
   every partition has a leader on every broker vs the baseline, the time until every
   broker has registered again.

Usage: python bench/cluster_admin.py [--ops N] [--outages N] [--skip-cluster]
(parts 2-4 need Debian's zookeeper and java)
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.broker_common import Broker, free_port, start_broker  # noqa: E402
from kafkactl.broker.metadata_cache import BrokerEndpoint  # noqa: E402
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache  # noqa: E402
from kafkactl.cluster import controller_requests as build  # noqa: E402
from kafkactl.cluster.broker_registry import BrokerInfo  # noqa: E402
from kafkactl.cluster.controller_requests import ClusterView  # noqa: E402
from kafkactl.cluster.topic_state import PartitionState  # noqa: E402
from kafkactl.protocol import codec  # noqa: E402
from kafkactl.protocol.api_keys import ApiKey  # noqa: E402
from tests.cluster.cluster_helpers import metadata, request  # noqa: E402
from tests.cluster.zk import ZooKeeperServer, available  # noqa: E402

SESSION_TIMEOUT_MS = 10_000
LAG_MS = 3_000  # replica.lag.time.max.ms: broker 3 paused longer than this leaves the ISR
CHROOT = "/bench-admin"
BROKERS = (1, 2, 3)


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 2 else float("nan")


def wait(cond: Callable[[], Any], timeout: float, what: str) -> float:
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)
    return time.monotonic() - start


# ---- 1. the request builder ---------------------------------------------------------------
def view_of(partitions: int, per_topic: int = 100) -> ClusterView:
    """3 live brokers, `partitions` partitions of RF 3 in topics of `per_topic`."""
    view = ClusterView(1, 7, brokers={b: BrokerInfo(
        b, "127.0.0.1", 9090 + b, (f"PLAINTEXT://127.0.0.1:{9090 + b}",), epoch=1000 + b)
        for b in BROKERS})
    for t in range(partitions // per_topic):
        name = f"topic-{t:04d}"
        view.assignments[name] = {}
        view.topic_ids[name] = uuid.uuid4()
        for p in range(per_topic):
            replicas = [BROKERS[(p + i) % 3] for i in range(3)]
            view.assignments[name][p] = replicas
            view.states[(name, p)] = PartitionState(replicas[0], 3, replicas, 7, 5)
    return view


def encoded(body: dict[str, Any]) -> bytes:
    return codec.encode_request(ApiKey.UPDATE_METADATA, build.UPDATE_METADATA_VERSION, 1,
                                "kafkactl-controller-1", body)


def decoded(frame: bytes) -> dict[str, Any]:
    header, pos = codec.decode_request_header(frame[4:])
    return codec.decode_request(header.api_key, header.api_version, frame[4:], pos)


def cpu_ms(fn: Callable[[], object], rounds: int) -> float:
    t0 = time.process_time()
    for _ in range(rounds):
        fn()
    return (time.process_time() - t0) * 1000 / rounds


def builder_figures() -> None:
    print("1. UpdateMetadata per ISR change, 3 brokers, RF 3 (request builder + codec)")
    for n in (1_000, 10_000):
        builder_figure(n)


def builder_figure(n: int) -> None:
    view = view_of(n)
    tp = ("topic-0000", 1)
    old = view.states[tp]
    view.states[tp] = PartitionState(old.leader, old.leader_epoch, old.isr[:2], 7,
                                     old.zk_version + 1)

    def full() -> list[bytes]:
        return [encoded(build.update_metadata(view, b)) for b in BROKERS]

    def incremental() -> list[bytes]:
        return [encoded(build.update_metadata(view, b, {tp})) for b in BROKERS]

    full_frames, inc_frames = full(), incremental()
    before, after = sum(map(len, full_frames)), sum(map(len, inc_frames))
    rounds = max(3, 30_000 // n)
    build_full, build_inc = cpu_ms(full, rounds), cpu_ms(incremental, rounds * 20)
    full_req, inc_req = decoded(full_frames[1]), decoded(inc_frames[1])
    cache = ZkMetadataCache("c", BrokerEndpoint(2, "127.0.0.1", 9092))
    cache.apply_update_metadata(full_req)

    def apply_full() -> None:  # a broker that joins: a new cache
        ZkMetadataCache("c", BrokerEndpoint(2, "127.0.0.1", 9092)).apply_update_metadata(
            full_req)

    def apply_inc() -> None:
        cache.apply_update_metadata(inc_req)

    apply_full_ms, apply_inc_ms = cpu_ms(apply_full, rounds), cpu_ms(apply_inc, rounds * 20)
    print(f"  {n:>6,} partitions: before (full) {before:>9,} B, after (incremental) "
          f"{after:>5,} B to the 3 brokers ({len(full_frames[0]):,} vs {len(inc_frames[0]):,}"
          f" B each): {before / after:,.0f}x fewer bytes")
    print(f"  {'':>6}             controller CPU to build+encode them {build_full:.2f} ms "
          f"vs {build_inc:.3f} ms ({build_full / build_inc:,.0f}x); a broker's CPU to "
          f"apply one {apply_full_ms:.2f} ms vs {apply_inc_ms:.3f} ms "
          f"({apply_full_ms / apply_inc_ms:,.0f}x)")


# ---- cluster helpers ------------------------------------------------------------------------
class CountingProxy:
    """TCP proxy in front of one broker; every UpdateMetadata request that passes is
    decoded: (arrival time, bytes on the wire, partitions)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.updates: list[tuple[float, int, int]] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), 5)
            except OSError:
                client.close()
                continue
            self._sockets += [client, upstream]
            threading.Thread(target=self._requests, args=(client, upstream),
                             daemon=True).start()
            threading.Thread(target=self._copy, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _read(s: socket.socket, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = s.recv(n - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return bytes(out)

    def _requests(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                head = self._read(src, 4)
                frame = self._read(src, struct.unpack(">i", head)[0])
                if struct.unpack(">h", frame[:2])[0] == ApiKey.UPDATE_METADATA:
                    body = decoded(head + frame)
                    parts = sum(len(t["partition_states"]) for t in body["topic_states"])
                    self.updates.append((time.monotonic(), len(head) + len(frame), parts))
                dst.sendall(head + frame)
        except (OSError, EOFError):
            pass
        finally:
            for s in (src, dst):
                s.close()

    @staticmethod
    def _copy(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                s.close()

    def close(self) -> None:
        self._server.close()
        for s in self._sockets:
            s.close()


class AdminCluster:
    """Three brokers on fixed ports (a restart keeps its port and data); broker 3 behind a
    CountingProxy."""

    def __init__(self, zk: ZooKeeperServer, base: Path) -> None:
        self.zk, self.base = zk, base
        self.ports = {b: free_port() for b in BROKERS}
        self.proxy = CountingProxy(self.ports[3])
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, b: int) -> None:
        adv = self.proxy.port if b == 3 else self.ports[b]
        args = [sys.executable, "-m", "kafkactl", "serve", "--data-dir",
                str(self.base / f"broker-{b}"), "--listen", f"127.0.0.1:{self.ports[b]}",
                "--log-level", "info"]
        for o in (f"broker.id={b}", f"zookeeper.connect={self.zk.connect}{CHROOT}",
                  f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
                  f"replica.lag.time.max.ms={LAG_MS}",
                  f"advertised.listeners=PLAINTEXT://127.0.0.1:{adv}"):
            args += ["--override", o]
        with open(self.base / f"broker-{b}.log", "ab") as log:
            self.procs[b] = subprocess.Popen(args, cwd=tempfile.gettempdir(), stderr=log)
        wait(lambda: self._listening(b), 30, f"broker {b} listening")

    def _listening(self, b: int) -> bool:
        if self.procs[b].poll() is not None:
            raise SystemExit(f"broker {b} exited: see {self.base}/broker-{b}.log")
        try:
            socket.create_connection(("127.0.0.1", self.ports[b]), 0.2).close()
            return True
        except OSError:
            return False

    def stop(self, b: int) -> None:
        proc = self.procs[b]
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def signal_all(self, sig: int) -> None:
        for proc in self.procs.values():
            proc.send_signal(sig)

    def port(self, b: int) -> int:
        return self.ports[b]

    def close(self) -> None:
        for b in self.procs:
            self.stop(b)
        self.proxy.close()


def leaders_everywhere(ports: list[int], topics: dict[str, int]) -> bool:
    """Every broker reports each topic with its partition count, every partition led."""
    for port in ports:
        md = metadata(port, list(topics))
        got = {t["name"]: t["partitions"] for t in md["topics"] if t["error_code"] == 0}
        for name, count in topics.items():
            parts = got.get(name)
            if parts is None or len(parts) != count or \
                    any(p["leader_id"] < 0 for p in parts):
                return False
    return True


def led_everywhere(ports: list[int], topics: dict[str, int]) -> Callable[[], bool]:
    return lambda: leaders_everywhere(ports, topics)


def updates_after(proxy: CountingProxy, count: int) -> Callable[[], bool]:
    return lambda: len(proxy.updates) >= count


def create_topic(port: int, name: str, partitions: int, rf: int,
                 assignments: dict[int, list[int]] | None = None) -> float:
    """CreateTopics; its latency in ms (the broker answers once it sees the leaders)."""
    body = {"topics": [{"name": name, "num_partitions": -1 if assignments else partitions,
                        "replication_factor": -1 if assignments else rf,
                        "assignments": [{"partition_index": p, "broker_ids": r}
                                        for p, r in (assignments or {}).items()],
                        "configs": []}], "timeout_ms": 60000, "validate_only": False}
    t0 = time.perf_counter()
    resp = request(port, ApiKey.CREATE_TOPICS, 5, body, 120)
    ms = (time.perf_counter() - t0) * 1000
    if resp["topics"][0]["error_code"]:
        raise SystemExit(f"CreateTopics {name}: {resp['topics'][0]}")
    return ms


def create_partitions(port: int, name: str, count: int) -> float:
    t0 = time.perf_counter()
    resp = request(port, ApiKey.CREATE_PARTITIONS, 3, {
        "topics": [{"name": name, "count": count, "assignments": None}],
        "timeout_ms": 60000, "validate_only": False}, 120)
    ms = (time.perf_counter() - t0) * 1000
    if resp["results"][0]["error_code"]:
        raise SystemExit(f"CreatePartitions {name}: {resp['results'][0]}")
    return ms


def admin_latencies(port: int, ops: int, rf: int, prefix: str,
                    all_ports: list[int]) -> tuple[list[float], list[float], list[float]]:
    """(CreateTopics ms, CreatePartitions ms, until every broker shows the new partitions
    led ms) over `ops` topics of 3 partitions, each then grown to 4."""
    created, grown, visible = [], [], []
    for i in range(ops):
        name = f"{prefix}-{i}"
        t0 = time.perf_counter()
        created.append(create_topic(port, name, 3, rf))
        wait(led_everywhere(all_ports, {name: 3}), 60, f"{name} led")
        visible.append((time.perf_counter() - t0) * 1000)
    for i in range(ops):
        name = f"{prefix}-{i}"
        grown.append(create_partitions(port, name, 4))
    wait(lambda: leaders_everywhere(all_ports, {f"{prefix}-{i}": 4 for i in range(ops)}),
         120, "grown topics led")
    return created, grown, visible


def show(what: str, cluster: list[float], single: list[float]) -> None:
    print(f"  {what}: cluster p50 {pct(cluster, 50):.1f} ms p99 {pct(cluster, 99):.1f} ms; "
          f"standalone p50 {pct(single, 50):.1f} ms p99 {pct(single, 99):.1f} ms "
          f"(p50 ratio {pct(cluster, 50) / pct(single, 50):.2f})")


# ---- 2-4. the cluster -------------------------------------------------------------------------
def cluster_figures(ops: int, outages: int) -> None:
    from kazoo.client import KazooClient

    base = Path(tempfile.mkdtemp(prefix="kafkactl-admin-bench-"))
    zk = ZooKeeperServer(base / "zk", jvm_options=())
    zk.start()
    cluster = AdminCluster(zk, base)
    single: Broker | None = None
    watcher = None
    try:
        for b in BROKERS:
            cluster.start(b)
        ports = [cluster.port(b) for b in BROKERS]
        wait(lambda: all(len(metadata(p, [])["brokers"]) == 3 for p in ports), 60,
             "three brokers")
        watcher = KazooClient(hosts=zk.connect + CHROOT)
        watcher.start(timeout=30)

        # -- 2. UpdateMetadata bytes measured at 1,000 partitions -----------------------------
        print("2. UpdateMetadata measured at broker 3 (1,000 partitions on brokers 1 and 2; "
              "the probe partition on 1 and 3)")
        create_topic(ports[0], "wide", 0, 0, {p: [1 + p % 2, 2 - p % 2] for p in range(1000)})
        create_topic(ports[0], "probe", 0, 0, {0: [1, 3]})
        wait(lambda: leaders_everywhere(ports, {"wide": 1000, "probe": 1}), 120,
             "1000 partitions led")
        cluster.stop(3)
        mark = len(cluster.proxy.updates)
        cluster.start(3)
        wait(lambda: len(cluster.proxy.updates) > mark, 60, "broker 3's first UpdateMetadata")
        _, full_bytes, full_parts = cluster.proxy.updates[mark]
        wait(lambda: isr_of(watcher, "probe") == [1, 3], 60, "broker 3 back in probe's ISR")
        topics = {"wide": 1000, "probe": 1}
        wait(lambda: leaders_everywhere(ports, topics), 60, "every partition led")
        changes: list[tuple[int, int]] = []
        for _ in range(2):
            mark = len(cluster.proxy.updates)
            cluster.procs[3].send_signal(signal.SIGSTOP)
            try:
                wait(lambda: isr_of(watcher, "probe") == [1], LAG_MS / 1000 + 30,
                     "the probe's ISR shrunk")
            finally:
                cluster.procs[3].send_signal(signal.SIGCONT)
            wait(lambda: isr_of(watcher, "probe") == [1, 3], 60, "the probe's ISR grown")
            wait(updates_after(cluster.proxy, mark + 2), 30, "both UpdateMetadata at broker 3")
            changes += [(size, parts) for _, size, parts in cluster.proxy.updates[mark:]]
        sizes = [s for s, _ in changes]
        print(f"  full (broker 3 rejoined): {full_bytes:,} B, {full_parts:,} partitions; "
              f"per ISR change: {statistics.median(sizes):,.0f} B (median of {len(sizes)}: "
              f"{sorted(set(p for _, p in changes))} partition(s) each): "
              f"{full_bytes / statistics.median(sizes):,.0f}x fewer bytes")

        # -- 3. admin latency: the cluster vs a standalone broker ---------------------------
        print(f"3. CreateTopics (3 partitions) and CreatePartitions (3 -> 4), {ops} each")
        c_created, c_grown, c_visible = admin_latencies(ports[0], ops, 3, "c", ports)
        single = start_broker()
        s_created, s_grown, s_visible = admin_latencies(single.port, ops, 1, "s",
                                                        [single.port])
        single.stop()
        single = None
        show("CreateTopics answered (RF 3 vs RF 1)", c_created, s_created)
        show("CreateTopics led on every broker", c_visible, s_visible)
        show("CreatePartitions answered", c_grown, s_grown)

        topics.update({f"c-{i}": 4 for i in range(ops)})

        # -- 4. ZooKeeper outage past the session timeout ------------------------------------
        print(f"4. ZooKeeper away past the session timeout ({SESSION_TIMEOUT_MS / 1000:.0f} s)"
              f", {outages} outage(s)")
        create_topic(ports[0], "outage", 60, 3)
        topics["outage"] = 60
        wait(lambda: leaders_everywhere(ports, topics), 120, "every partition led")
        registered, led = [], []
        for _ in range(outages):
            watcher.stop()
            zk.stop()
            cluster.signal_all(signal.SIGSTOP)
            try:
                zk.start()
                watcher.start(timeout=30)
                wait(lambda: not watcher.get_children("/brokers/ids"), 60,
                     "every broker's session expired")
            finally:
                cluster.signal_all(signal.SIGCONT)
            t0 = time.monotonic()
            registered.append(wait(lambda: len(watcher.get_children("/brokers/ids")) == 3, 120,
                                   "every broker registered again"))
            wait(lambda: leaders_everywhere(ports, topics), 120,
                 "every partition led on every broker")
            led.append(time.monotonic() - t0)
            print(f"  outage: every broker registered again after {registered[-1]:.2f} s; "
                  f"every partition led on every broker after {led[-1]:.2f} s "
                  f"(ratio {led[-1] / registered[-1]:.2f})")
        print(f"  median: registered {statistics.median(registered):.2f} s, led "
              f"{statistics.median(led):.2f} s (ratio "
              f"{statistics.median(led) / statistics.median(registered):.2f}); "
              f"{sum(topics.values()):,} partitions")
    finally:
        if watcher is not None:
            watcher.stop()
            watcher.close()
        if single is not None:
            single.stop()
        cluster.close()
        zk.stop()
        if os.environ.get("KEEP_BENCH_DIR"):
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def isr_of(zk: Any, topic: str) -> list[int]:
    from kafkactl.cluster import topic_state

    state = topic_state.read_partition_state(zk, topic, 0)
    return sorted(state.isr) if state is not None else []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=40, help="CreateTopics/CreatePartitions each")
    ap.add_argument("--outages", type=int, default=3)
    ap.add_argument("--skip-cluster", action="store_true", help="part 1 only")
    args = ap.parse_args()
    builder_figures()
    if args.skip_cluster:
        return
    if available() is not None:
        raise SystemExit(f"parts 2-4 need ZooKeeper and java: {available()}")
    cluster_figures(args.ops, args.outages)


if __name__ == "__main__":
    main()
