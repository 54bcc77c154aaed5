"""`kafkactl produce --transactional-id` stopped (Ctrl-C, SIGTERM) while a broker does not
answer, as a tester found it:

- A signal during a commit whose records wait for a broker that is SIGSTOPped or killed
  (and stays down) was held for the whole commit, up to delivery.timeout.ms, then lost: exit
  1 "a record of the transaction failed: ... expired", never the signal's 130/143 (systemd
  and docker stop SIGKILL it first). It ends the commit's wait at once now: the abort is
  bounded too, the summary says the transaction was left open, with the transactional.id and
  how to end it, what was committed and the input record to resume from, and the exit
  status is the signal's. A producer of the same transactional.id started afterwards aborts
  what was left open, as the summary says.
- The summary's "open transaction (N records)" counted records read but never handed to
  the producer (a stop while it waited for buffer.memory): N is what was sent in it now,
  and the records read and never sent are counted apart.
- `consume` with a client.id, group id or group.instance.id that is not text failed with
  "'utf-8' codec can't encode ..." (exit 1) from the connection: refused up front (exit 2),
  as produce refuses it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import BrokerProcess
from tests.groups.helpers import read_lines
from tests.polling import wait_until
from tests.sockets import all_answered, end_offset, queued_bytes, queued_requests

KAFKACTL = [sys.executable, "-m", "kafkactl"]
# short timeouts: the old code's commit gave up after delivery.timeout.ms (exit 1) instead
# of waiting 120 s; they change nothing in how the stop goes now
FAST = ["-X", "request.timeout.ms=3000", "-X", "delivery.timeout.ms=4000"]


def _run(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(KAFKACTL + list(args), input=input, capture_output=True,
                          timeout=120)


def _read_committed(bootstrap: str, topic: str) -> list[bytes]:
    r = _run("consume", "-t", topic, "-o", "earliest", "-e", "-q", "--isolation-level",
             "read_committed", "-b", bootstrap)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def _start(broker: BrokerProcess, topic: str, tid: str, *extra: str) -> subprocess.Popen[bytes]:
    r = _run("topics", "create", "-t", topic, "-b", broker.bootstrap)
    assert r.returncode == 0, r.stderr
    return subprocess.Popen(KAFKACTL + ["produce", "-t", topic, "--transactional-id", tid,
                                        "-b", broker.bootstrap, *extra],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize(("down", "sig", "code"), [
    ("stopped", signal.SIGTERM, 143), ("killed", signal.SIGINT, 130)])
def test_a_signal_during_a_commit_to_a_broker_that_does_not_answer(
        broker_factory: Any, down: str, sig: int, code: int) -> None:
    """The commit waits for the third transaction's records at a broker SIGSTOPped (or
    then SIGKILLed, staying down) when the signal comes."""
    broker: BrokerProcess = broker_factory()
    assert broker.proc is not None
    topic, tid = f"txn-{down}", f"loader-{down}"
    proc = _start(broker, topic, tid, "--transaction-records", "100", "--linger-ms", "1",
                  *FAST)
    assert proc.stdin is not None and proc.stderr is not None
    lines: list[bytes] = []
    reader = read_lines(proc.stderr, lines)
    first = [f"a-{i}".encode() for i in range(250)]
    last = [f"b-{i}".encode() for i in range(50)]
    stopped = False
    try:
        proc.stdin.write(b"".join(r + b"\n" for r in first))
        proc.stdin.flush()
        # two transactions committed (200 records and 2 markers), and 50 records in the
        # third: its partition is in it (AddPartitionsToTxn answered)
        wait_until(lambda: end_offset(broker.bootstrap, topic) >= 252, 60,
                   "two committed transactions and the open one's records")
        wait_until(lambda: queued_requests(broker.port) == 0, 20,
                   "the broker read every request")
        broker.proc.send_signal(signal.SIGSTOP)
        stopped = True
        # its other 50 records, then the end of the input: the producer sends them and
        # commits, its only step left (one write of less than PIPE_BUF)
        proc.stdin.write(b"".join(r + b"\n" for r in last))
        proc.stdin.close()
        wait_until(lambda: queued_bytes(broker.port), 60,
                   "the third transaction's records waiting at the stopped broker")
        if down == "killed":
            broker.kill()
            stopped = False
        proc.send_signal(sig)
        rc = proc.wait(60)  # (a hang guard: the old code held the signal for the commit)
    finally:
        if stopped:
            broker.proc.send_signal(signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    err = b"".join(lines).decode()
    assert rc == code, err
    summary = err.splitlines()[-1]
    assert summary.startswith(("interrupted: the open transaction (100 records) was not "
                               "aborted (", "interrupted: the abort of the open transaction "
                               "(100 records) was not answered (")), err
    assert summary.endswith(
        f"transaction.timeout.ms passes (900,000 ms), holding read_committed consumers of "
        f"its partitions back until then; to end it sooner, start a producer of "
        f"transactional.id '{tid}' (`kafkactl produce --transactional-id {tid}` aborts it "
        f"as it starts); 200 records committed to {topic} in 2 transactions; resume from "
        f"input record 201"), err
    # what the summary says: the next producer of the id aborts the open transaction
    if down == "killed":
        broker.start()
    else:
        wait_until(lambda: queued_bytes(broker.port) == 0, 60,
                   "the resumed broker read what waited")
    more = [f"c-{i}".encode() for i in range(10)]
    r = _run("produce", "-t", topic, "--transactional-id", tid, "-b", broker.bootstrap,
             input=b"".join(m + b"\n" for m in more))
    assert r.returncode == 0, r.stderr
    assert _read_committed(broker.bootstrap, topic) == first[:200] + more


def test_the_open_transaction_counts_what_was_sent(broker_factory: Any) -> None:
    """With --sync the producer waits for each record's answer: the broker SIGSTOPped, it
    waits for the first of ten records read together when SIGTERM comes. The open
    transaction holds the two records sent (the first one before them, and that one); the
    other nine were read, never sent (it said "11 records")."""
    broker: BrokerProcess = broker_factory()
    assert broker.proc is not None
    proc = _start(broker, "txn-count", "loader-count", "--sync")
    assert proc.stdin is not None and proc.stderr is not None
    lines: list[bytes] = []
    reader = read_lines(proc.stderr, lines)
    try:
        proc.stdin.write(b"first\n")
        proc.stdin.flush()
        wait_until(lambda: end_offset(broker.bootstrap, "txn-count") >= 1, 60,
                   "the first record")
        wait_until(lambda: queued_requests(broker.port) == 0, 20,
                   "the broker read every request")
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            # (one write of less than PIPE_BUF: read at once, one chunk)
            proc.stdin.write(b"".join(b"r%d\n" % i for i in range(10)))
            proc.stdin.flush()
            wait_until(lambda: queued_bytes(broker.port), 60,
                       "the first of them waiting at the stopped broker")
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(120)  # (a hang guard: the old code took 60 s)
        finally:
            broker.proc.send_signal(signal.SIGCONT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    err = b"".join(lines).decode()
    assert rc == 143, err
    assert err.splitlines()[-1] == (
        "interrupted: the open transaction (2 records; 9 more read but never sent) was not "
        "aborted (records of it in flight were not answered within 5 s, and an abort is not "
        "sent before they are): its coordinator aborts it when transaction.timeout.ms passes "
        "(900,000 ms), holding read_committed consumers of its partitions back until then; "
        "to end it sooner, start a producer of transactional.id 'loader-count' (`kafkactl "
        "produce --transactional-id loader-count` aborts it as it starts); 0 records "
        "committed to txn-count in 0 transactions"), err


def test_a_commit_not_answered_is_unknown_not_aborted(broker_factory: Any) -> None:
    """SIGTERM while the last commit's EndTxn waits at a SIGSTOPped broker (its records
    acknowledged): after 5 s the summary says its outcome is unknown (exit 143), not that
    it was aborted; resumed, the broker commits it."""
    broker: BrokerProcess = broker_factory()
    assert broker.proc is not None
    topic, tid = "txn-unknown", "loader-unknown"
    proc = _start(broker, topic, tid, "--transaction-records", "100", "--linger-ms", "1")
    assert proc.stdin is not None and proc.stderr is not None
    lines: list[bytes] = []
    reader = read_lines(proc.stderr, lines)
    records = [f"u-{i}".encode() for i in range(250)]
    try:
        proc.stdin.write(b"".join(r + b"\n" for r in records))
        proc.stdin.flush()
        # two transactions committed, the third one's 50 records written and acknowledged
        wait_until(lambda: end_offset(broker.bootstrap, topic) >= 252, 60,
                   "two committed transactions and the open one's records")
        wait_until(lambda: all_answered(broker.port), 20, "every answer read")
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            proc.stdin.close()  # the end of the input: the last commit, EndTxn only
            wait_until(lambda: queued_bytes(broker.port), 60,
                       "EndTxn waiting at the stopped broker")
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(120)  # (a hang guard: the old code took 60 s, then exit 1)
        finally:
            broker.proc.send_signal(signal.SIGCONT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    err = b"".join(lines).decode()
    assert rc == 143, err
    assert err.splitlines()[-1] == (
        "interrupted: the commit of the last transaction (50 records) was sent but not "
        "answered: it may or may not be committed (`kafkactl transactions describe -t "
        "loader-unknown` says CompleteCommit if it was); 200 records committed to "
        "txn-unknown in 2 transactions before it; resume from input record 201 (or 251 if "
        "it was committed)"), err
    # the broker, resumed, takes the EndTxn: committed, all 250 records
    wait_until(lambda: _read_committed(broker.bootstrap, topic) == records, 60,
               "the last transaction committed")


@pytest.mark.parametrize("args", [
    ["-X", b"client.id=\xff"], ["-G", b"\xfe"], ["-G", "g", "-X", b"group.instance.id=\xfd"]],
    ids=["client.id", "group", "group.instance.id"])
def test_consume_refuses_a_setting_that_is_not_text(module_broker: BrokerProcess,
                                                    args: list[Any]) -> None:
    # (the topic exists: the old code failed with "'utf-8' codec can't encode", exit 1)
    _run("topics", "create", "-t", "any", "--if-not-exists", "-b", module_broker.bootstrap)
    r = subprocess.run(KAFKACTL + ["consume", "-t", "any", "-o", "earliest", "-e", "-b",
                                   module_broker.bootstrap, *args],
                       capture_output=True, timeout=60)
    assert r.returncode == 2, r.stderr
    shown = {"client.id": "-X client.id='\\xff'", "group": "-G/--group='\\xfe'"}.get(
        "client.id" if b"client.id" in args[-1] else "group" if args[0] == "-G" and
        len(args) == 2 else "", "-X group.instance.id='\\xfd'")
    assert r.stderr.decode() == (f"error: {shown}: not text in this locale's encoding "
                                 f"(utf-8); it is a UTF-8 string in Kafka's requests\n")
