"""Compaction in a running broker: a compacted topic keeps the latest value per key with
its original offset (dump-log shows the gaps), and SIGKILL during cleaning leaves an intact
log."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.groups.helpers import kafkactl, wait_until

KEYS = 1000
CLEANER = {"log_cleaner_backoff_ms": "100", "group_initial_rebalance_delay_ms": "0"}


def _create(bootstrap: str) -> None:
    r = kafkactl("topics", "create", "-t", "cmp", "--partitions", "1", "--config",
                 "cleanup.policy=compact", "--config", "segment.bytes=20000", "--config",
                 "delete.retention.ms=0", "--config", "min.cleanable.dirty.ratio=0.01",
                 "-b", bootstrap)
    assert r.returncode == 0, r.stderr


def _produce_versions(bootstrap: str, rounds: int) -> dict[str, str | None]:
    from confluent_kafka import Producer

    # small batches, so that segments (20000 bytes) roll between them
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 8000})
    latest: dict[str, str | None] = {}
    for r in range(rounds):
        for k in range(KEYS):
            value = None if (r == rounds - 1 and k % 7 == 0) else f"v{r}-{k}"
            p.produce("cmp", key=f"k{k}".encode(),
                      value=None if value is None else value.encode())
            latest[f"k{k}"] = value
    assert p.flush(30) == 0
    # filler so that the tombstones leave the active segment
    latest.update(_produce_filler(bootstrap, "fill", 400))
    return latest


def _produce_filler(bootstrap: str, prefix: str, count: int) -> dict[str, str | None]:
    """`count` records of 100 bytes under new keys: segments (20000 bytes) roll."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 8000})
    for i in range(count):
        p.produce("cmp", key=f"{prefix}{i}".encode(), value=b"x" * 100)
    assert p.flush(30) == 0
    return {f"{prefix}{i}": "x" * 100 for i in range(count)}


def _read_all(bootstrap: str) -> list[tuple[int, str, str | None]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition("cmp", 0, 0)])
    out = []
    while True:
        m = c.poll(5)
        assert m is not None, "timed out reading cmp"
        if m.error():
            break  # partition EOF
        out.append((m.offset(), m.key().decode(),
                    None if m.value() is None else m.value().decode()))
    c.close()
    return out


def _check(records: list[tuple[int, str, str | None]], latest: dict[str, str | None]) -> None:
    offsets = [o for o, _k, _v in records]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    state: dict[str, str | None] = {}
    for _o, k, v in records:
        state[k] = v
    assert {k: v for k, v in state.items() if v is not None} == \
        {k: v for k, v in latest.items() if v is not None}


def test_compaction_in_the_broker_and_dump_log(broker_factory: Any) -> None:
    b = broker_factory(**CLEANER)
    _create(b.bootstrap)
    latest = _produce_versions(b.bootstrap, 3)
    total = 3 * KEYS + 400
    cp = b.data_dir / "cleaner-offset-checkpoint"

    def cleaned_upto() -> int:
        text = cp.read_text() if cp.exists() else ""
        return int(text.split("cmp 0 ")[1].split()[0]) if "cmp 0 " in text else -1

    # a pass that saw every version (the tombstones are below the active segment)
    wait_until(lambda: cleaned_upto() >= 3 * KEYS, 60, "a full cleaner pass")
    # the checkpoint is written after the pass swapped its segments in (cleaner.commit), so
    # what is read now is at least that clean
    upto = cleaned_upto()
    # that pass kept the tombstones and stamped their delete horizon (KIP-534: now +
    # delete.retention.ms=0); a later pass removes them: make the log dirty again
    latest.update(_produce_filler(b.bootstrap, "more", 200))
    wait_until(lambda: cleaned_upto() > upto, 60, "a second cleaner pass")
    records = _read_all(b.bootstrap)
    _check(records, latest)
    assert len(records) < total / 2  # old versions are gone
    deleted = {k for k, v in latest.items() if v is None}
    assert not [k for o, k, v in records if v is None and o < upto]
    assert not [k for o, k, _v in records if k in deleted and o < upto]
    b.stop()
    segs = sorted(str(p) for p in Path(b.data_dir / "cmp-0").glob("*.log"))
    r = kafkactl("dump-log", *segs, "--deep-iteration")
    assert r.returncode == 0, r.stderr
    dumped = [int(line.split()[2]) for line in r.stdout.splitlines()
              if line.startswith("| offset:")]
    assert dumped == [o for o, _k, _v in records]  # the very offsets consumers saw
    assert "Non-consecutive offsets" in r.stderr  # gaps where old versions were
    b.start()
    _check(_read_all(b.bootstrap), latest)


def test_sigkill_during_cleaning_keeps_the_log_intact(broker_factory: Any) -> None:
    b = broker_factory(**CLEANER)
    _create(b.bootstrap)
    latest: dict[str, str | None] = {}
    for delay in (0.05, 0.2, 0.4):
        latest.update(_produce_versions(b.bootstrap, 2))
        time.sleep(delay)  # elapsed time is the point: kill at several moments of a pass
        b.kill()
        b.start()
        _check(_read_all(b.bootstrap), latest)
