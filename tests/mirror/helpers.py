"""Helpers for the mirror tests: real `kafkactl mirror` processes, producing numbered
records (key, value, headers, timestamp), and reading whole topics back per partition."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkactl.client.admin import AdminClient
from kafkactl.client.consumer import Consumer
from kafkactl.client.producer import Producer
from tests import zygote
from tests.polling import wait_until

# Brokers for these tests: groups form at once, and offsets live in one partition.
FAST = {"group_initial_rebalance_delay_ms": "0", "offsets_topic_num_partitions": "1"}

Row = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


@dataclass
class MirrorProcess:
    proc: subprocess.Popen[bytes] | zygote.Forked
    log_path: Path
    status_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def status(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self.status_path.read_text()))
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def terminate(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


def start_mirror(tmp: Path, source: str, target: str, *args: str,
                 name: str = "mirror") -> MirrorProcess:
    """`kafkactl mirror --source S --target T ARGS` with a --json-status file."""
    log_path = tmp / f"{name}.log"
    status_path = tmp / f"{name}-status.json"
    status_path.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "kafkactl", "mirror", "--source", source, "--target", target,
           "--json-status", str(status_path), "--status-interval", "0.2",
           "--topic-refresh-ms", "500", "--commit-interval-ms", "200", *args]
    proc: Any = zygote.spawn(cmd[3:], str(log_path))
    if proc is None:  # KAFKACTL_TEST_FORK=0
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    return MirrorProcess(proc, log_path, status_path)


def run_mirror(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return zygote.run(["mirror", *args], text=True, timeout=timeout)


def create_topics(bootstrap: str, topics: dict[str, int],
                  configs: dict[str, str] | None = None) -> None:
    with AdminClient(bootstrap) as admin:
        errors = admin.create_topics({t: (n, 1, configs or {}) for t, n in topics.items()})
        assert all(e is None for e in errors.values()), errors
        for t in topics:
            admin.client.ensure_topics([t], allow_auto_create=False)


def produce(bootstrap: str, topic: str, start: int, count: int, *,
            partitions: int | None = None, value_size: int = 0) -> None:
    """Records start..start+count-1 of `topic`: key k<i>, value v<i> (padded), a header
    and a timestamp of its own; spread round the partitions when given."""
    with Producer(bootstrap, linger_ms=2) as p:
        for i in range(start, start + count):
            value = f"{topic}:v{i}".encode().ljust(value_size, b".")
            p.send(topic, value, f"k{i}".encode(),
                   partition=None if partitions is None else i % partitions,
                   headers=[("seq", str(i).encode()), ("empty", None)],
                   timestamp_ms=1_600_000_000_000 + i)
        assert p.flush(60)


def read_topic(bootstrap: str, topic: str, *, read_committed: bool = False
               ) -> dict[int, list[Row]]:
    """Every record of every partition, in offset order (read_committed: up to each
    partition's last stable offset, what such a consumer sees)."""
    with Consumer(bootstrap_servers=bootstrap, isolation_level=int(read_committed)) as c:
        parts = c.simple.partitions_for(topic)
        tps = [(topic, p) for p in parts]
        c.assign(tps)
        end = c.end_offsets(tps)
        c.seek_to_beginning(*tps)
        out: dict[int, list[Row]] = {p: [] for p in parts}

        def done() -> bool:
            for tp, recs in c.poll(200).items():
                out[tp[1]].extend(
                    (None if r.key is None else bytes(r.key),
                     None if r.value is None else bytes(r.value),
                     tuple((k, None if v is None else bytes(v)) for k, v in r.headers),
                     r.timestamp) for r in recs)
            return all(c.position(tp) >= end[tp] for tp in tps)

        wait_until(done, 60, f"reading {topic} to its end")
        return out


def committed_offset(bootstrap: str, group: str, topic: str, partition: int = 0) -> int:
    """`group`'s committed offset of the partition (-1: none) in the cluster of
    `bootstrap` (the target's, for --exactly-once)."""
    from kafkactl.client.group import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient

    client = KafkaClient(bootstrap)
    try:
        return GroupAdmin(client).fetch_offsets(group, [(topic, partition)])[(topic, partition)]
    finally:
        client.close()


def copied(bootstrap: str, topic: str, at_least: int) -> bool:
    """The topic holds `at_least` records (False while the mirror has not made it yet)."""
    try:
        return count(bootstrap, topic) >= at_least
    except Exception:  # the mirror has not made the target topic yet
        return False


def count(bootstrap: str, topic: str) -> int:
    with Consumer(bootstrap_servers=bootstrap) as c:
        parts = c.simple.partitions_for(topic)
        tps = [(topic, p) for p in parts]
        end, begin = c.end_offsets(tps), c.beginning_offsets(tps)
        return sum(end[tp] - begin[tp] for tp in tps)


def assert_same(source: dict[int, list[Row]], target: dict[int, list[Row]]) -> None:
    """Record by record per partition: equal."""
    assert sorted(source) == sorted(target)
    for p in source:
        assert len(target[p]) == len(source[p]), f"partition {p}"
        assert target[p] == source[p], f"partition {p} differs"


def assert_nothing_missing(source: dict[int, list[Row]],
                           target: dict[int, list[Row]]) -> int:
    """Every source record in the target partition, in order of first appearance; repeats
    only of records already seen (a re-sent kill window). Returns the number of repeats."""
    assert sorted(source) == sorted(target)
    repeats = 0
    for p in source:
        seen: set[Row] = set()
        firsts: list[Row] = []
        for row in target[p]:
            if row in seen:
                repeats += 1
            else:
                seen.add(row)
                firsts.append(row)
        assert firsts == source[p], (
            f"partition {p}: {len(source[p])} source records, {len(firsts)} distinct in the "
            f"target; first missing: {next((r for r in source[p] if r not in seen), None)}")
    return repeats


def mirrored(m: MirrorProcess, total: int) -> bool:
    st = m.status()
    return st is not None and st.get("mirrored", 0) >= total
