"""Consume-transform-produce with confluent-kafka (librdkafka) against a real broker
(KIP-98, KIP-447): a processor reads `ctp-in` as a group member, writes each record
transformed to `ctp-out` and commits its consumed offsets in the same transaction
(send_offsets_to_transaction: AddOffsetsToTxn + TxnOffsetCommit, pending in the group
coordinator until the marker). It is SIGKILLed mid-run several times and restarted; a
read_committed reader of `ctp-out` then holds every input record exactly once."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from tests.groups.helpers import FAST, create_topic, produce, wait_until

PROCESSOR = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer, Producer, KafkaException

    bootstrap = sys.argv[1]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "session.timeout.ms": 6000})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ctp-processor",
                  "transaction.timeout.ms": 60000, "linger.ms": 5})
    p.init_transactions(60)
    c.subscribe(["ctp-in"])
    while True:
        msgs = c.consume(200, 0.5)
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce("ctp-out", key=m.key(), value=m.value().upper(),
                      partition=m.partition())
        p.send_offsets_to_transaction(c.position(c.assignment()),
                                      c.consumer_group_metadata(), 60)
        p.commit_transaction(60)
        print("committed", len(msgs), flush=True)
""")


def _read_committed(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    c.subscribe([topic])
    out: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                if len(out) >= expected and len(eof) == 3:
                    break
                continue
            if m.error() is not None:
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                continue
            eof.discard(m.partition())
            out.append(m.value())
    finally:
        c.close()
    return out


def test_killed_processor_restarted_leaves_output_exactly_once(broker_factory: Any,
                                                                tmp_path: Path) -> None:
    broker = broker_factory(**FAST)
    b = broker.bootstrap
    create_topic(b, "ctp-in", 3)
    create_topic(b, "ctp-out", 3)
    total = 6000
    script = tmp_path / "processor.py"
    script.write_text(PROCESSOR)
    log = tmp_path / "processor.log"

    def start() -> subprocess.Popen[bytes]:
        with open(log, "ab") as f:
            return subprocess.Popen([sys.executable, str(script), b], stdout=f,
                                    stderr=subprocess.STDOUT)

    # each run has records of its own to read: a run that found the input already all
    # committed by the one before would never commit twice
    slice_ = total // 4
    for r in range(3):
        produce(b, "ctp-in", [f"rec-{i}" for i in range(r * slice_, (r + 1) * slice_)])
        proc = start()
        before = log.read_text().count("committed") if log.exists() else 0
        wait_until(lambda before=before: log.read_text().count("committed") >= before + 2, 120,
                   f"the processor to commit twice:\n{log.read_text()[-3000:]}")
        proc.send_signal(signal.SIGKILL)  # mid-run: an open transaction is left behind
        proc.wait()
    produce(b, "ctp-in", [f"rec-{i}" for i in range(3 * slice_, total)])
    proc = start()
    try:
        want = sorted(f"REC-{i}".encode() for i in range(total))
        got: list[bytes] = []

        def all_out() -> bool:
            nonlocal got
            got = _read_committed(b, "ctp-out", total)
            return len(got) >= total
        wait_until(all_out, 180, f"the output to hold {total} records:\n"
                                 f"{log.read_text()[-3000:]}")
        assert sorted(got) == want  # every record once: nothing lost, nothing twice
    finally:
        proc.kill()
        proc.wait()
