"""`kafkactl produce` stopped (Ctrl-C, SIGTERM) while a broker does not answer, and while
it writes --failed-file at the end.

- Records in flight to a broker that does not answer (SIGSTOPped) when Ctrl-C comes: every
  record not acknowledged is in --failed-file, and the summary's count is the file's (the
  file was empty while the summary said "all 100 are in" it: the sender, stuck in a call to
  the stopped broker, had not failed its batches when Producer.abort() gave up waiting).
- Producer.abort() fails the batches of a sender that does not stop in time itself, each
  batch once (the sender completing it later changes nothing).
- A signal while --failed-file is written does not cut the write short: the file is written
  whole, the summary is printed and the exit status is the signal's (it was 130 with no
  summary, also for SIGTERM, and the previous run's file stayed in place).
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import termios
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess
from tests.groups.helpers import read_lines
from tests.polling import wait_until
from tests.sockets import end_offset, queued_bytes, queued_requests

KAFKACTL = [sys.executable, "-m", "kafkactl"]


def _values(bootstrap: str, topic: str) -> list[bytes]:
    out = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-e", "-q", "-f",
                          "%s\n"], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split(b"\n")[:-1]


def test_ctrl_c_while_the_broker_does_not_answer_keeps_every_record(
        broker: BrokerProcess, tmp_path: Path) -> None:
    """The records are in flight and the sender is stuck in a metadata refresh
    (metadata.max.age.ms: every second) to the stopped broker, which blocks it for
    request.timeout.ms (30 s) when Ctrl-C comes: the producer cannot wait for it to fail
    the records."""
    ff = tmp_path / "t.failed"
    proc = subprocess.Popen(KAFKACTL + ["produce", "-b", broker.bootstrap, "-t", "out",
                                        "--failed-file", str(ff),
                                        "-X", "metadata.max.age.ms=1000"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stderr is not None and broker.proc is not None
    lines: list[bytes] = []
    reader = read_lines(proc.stderr, lines)
    pre = [b"pre%d" % i for i in range(10)]
    during = [b"during%d" % i for i in range(100)]
    try:
        proc.stdin.write(b"".join(r + b"\n" for r in pre))
        proc.stdin.flush()
        wait_until(lambda: end_offset(broker.bootstrap, "out") == 10, 60,
                   "the first 10 records")
        wait_until(lambda: queued_requests(broker.port) == 0, 20,
                   "the broker read every request")
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            # (one write of less than PIPE_BUF: read at once, before anything is sent)
            proc.stdin.write(b"".join(r + b"\n" for r in during))
            proc.stdin.close()
            first = wait_until(lambda: queued_bytes(broker.port), 60,
                               "the records' request waiting at the stopped broker")
            wait_until(lambda: queued_bytes(broker.port) > first, 60,
                       "the metadata refresh waiting behind it (the sender blocked in it)")
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(120)
        finally:
            broker.proc.send_signal(signal.SIGCONT)
        reader.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = b"".join(lines).decode()
    assert rc == 130, err
    assert sorted(ff.read_bytes().split(b"\n")[:-1]) == sorted(during), err
    assert (f"error: 10 of 110 records acknowledged, 100 not: interrupted before the "
            f"broker acknowledged them; all 100 are in {ff}") in err, err
    # (a record of the failed file may be in the log too: it was in flight at the stop)
    logged = _values(broker.bootstrap, "out")
    assert logged[:10] == pre
    assert set(logged) <= set(pre) | set(during)


def test_abort_fails_the_batches_of_a_stuck_sender_each_once(
        module_broker: BrokerProcess) -> None:
    """The sender is held (in a delivery callback of the first record) while more batches
    wait: abort() cannot wait for it, so it fails them itself, before it returns; the
    sender, let go afterwards, completes none of them a second time."""
    from kafkactl.client.errors import ClosedBeforeDelivery
    from kafkactl.client.producer import Producer

    p = Producer(module_broker.bootstrap, linger_ms=0)
    done: list[tuple[int, int, BaseException | None]] = []
    lock = threading.Lock()

    def on_batch(batch: Any, _offset: int, error: BaseException | None) -> None:
        with lock:
            done.append((id(batch), batch.record_count, error))

    p.add_batch_callback(on_batch)
    entered, release = threading.Event(), threading.Event()

    def hold(_metadata: Any, _error: BaseException | None) -> None:
        entered.set()
        release.wait(60)

    try:
        p.send("stuck", b"first", on_delivery=hold, partition=0)
        assert entered.wait(60), "the first record's delivery"
        for i in range(3):
            p.send_values("stuck", [b"v%d-%d" % (i, j) for j in range(10)], partition=0)
        p.abort()
        with lock:
            after_abort = list(done)
        # every batch, the first one too (its callbacks had not run: it is not known to be
        # acknowledged), is done when abort() returns
        assert sum(n for _b, n, _e in after_abort) == 31, after_abort
        assert all(isinstance(e, ClosedBeforeDelivery) for _b, _n, e in after_abort)
    finally:
        release.set()
    p.sender.join(60)
    assert not p.sender.is_alive()
    with lock:
        assert done == after_abort  # none a second time


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_failed_file_is_written_does_not_cut_it_short(
        module_broker: BrokerProcess, tmp_path: Path, sig: int, code: int) -> None:
    """--failed-file a FIFO, whose reader lets the write go on only when it reads: the
    signal comes while kafkactl is blocked writing a record too large to send there."""
    proc, rfd, lines, reader = _blocked_writing_the_failed_file(module_broker, tmp_path,
                                                                f"fifo-{code}")
    got = bytearray()
    try:
        proc.send_signal(sig)
        os.set_blocking(rfd, True)
        while chunk := os.read(rfd, 1 << 16):  # to the end: the writer closed it
            got += chunk
        rc = proc.wait(60)
        reader.join(10)
    finally:
        os.close(rfd)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = b"".join(lines).decode()
    assert rc == code, err
    assert bytes(got) == BIG + b"\n"
    assert err.startswith("error: 1 of 2 records acknowledged, 1 not: a record is "), err
    assert f"; it is in {tmp_path / 'failed.fifo'}" in err, err


def test_a_second_signal_while_finishing_gives_up(module_broker: BrokerProcess,
                                                   tmp_path: Path) -> None:
    """A FIFO nobody reads would hold the run forever: the second signal ends it (SIGINT
    then SIGTERM: their handlers run in that order, the second one's status)."""
    proc, rfd, lines, reader = _blocked_writing_the_failed_file(module_broker, tmp_path,
                                                                "fifo-twice")
    try:
        proc.send_signal(signal.SIGINT)
        # (taken by the main thread, blocked in write(), which the SIGTERM interrupts too)
        wait_until(lambda: not _pending(proc.pid, signal.SIGINT), 30, "SIGINT delivered")
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
        reader.join(10)
    finally:
        os.close(rfd)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = b"".join(lines).decode()
    assert rc == 143, err
    assert err == (f"error: stopped again while finishing: no summary, and --failed-file "
                   f"{tmp_path / 'failed.fifo'} may not hold this run's records\n"), err


BIG = b"x" * (1 << 20)


def _pending(pid: int, sig: int) -> bool:
    """`sig` is pending for the process or its main thread (/proc: ShdPnd, SigPnd)."""
    status = Path(f"/proc/{pid}/status").read_text()
    masks = [int(line.split()[1], 16) for line in status.splitlines()
             if line.startswith(("ShdPnd:", "SigPnd:"))]
    return any(mask >> (sig - 1) & 1 for mask in masks)


def _blocked_writing_the_failed_file(broker: BrokerProcess, tmp_path: Path, topic: str,
                                     ) -> tuple[subprocess.Popen[bytes], int, list[bytes],
                                                threading.Thread]:
    """kafkactl produce blocked writing --failed-file, a FIFO whose read end (returned)
    is full: a record too large to send is being written there."""
    fifo = tmp_path / "failed.fifo"
    os.mkfifo(fifo)
    src = tmp_path / "in"
    src.write_bytes(b"small\n" + BIG + b"\n")
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # (open before the writer: no wait)
    proc = subprocess.Popen(KAFKACTL + ["produce", "-b", broker.bootstrap, "-t", topic,
                                        "-f", str(src), "-X", "max.request.size=4096",
                                        "--failed-file", str(fifo)], stderr=subprocess.PIPE)
    assert proc.stderr is not None
    lines: list[bytes] = []
    reader = read_lines(proc.stderr, lines)
    try:
        capacity = fcntl.fcntl(rfd, fcntl.F_GETPIPE_SZ)

        def unread() -> int:
            buf = bytearray(4)
            fcntl.ioctl(rfd, termios.FIONREAD, buf)
            return int.from_bytes(buf, sys.byteorder)

        wait_until(lambda: unread() >= capacity, 120, "the failed file's FIFO full")
    except BaseException:
        os.close(rfd)
        proc.kill()
        proc.wait()
        raise
    return proc, rfd, lines, reader
