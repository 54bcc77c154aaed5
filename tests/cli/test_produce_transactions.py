"""`kafkactl produce --transactional-id` and `kafkactl consume --isolation-level` against a
real broker: a pipe lands all-or-nothing (Ctrl-C mid-pipe leaves nothing a read_committed
consumer sees), committed transactions are visible in order, and kcat (librdkafka) with
`-X isolation.level=read_committed` reads exactly what kafkactl does."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from typing import Any

import pytest

from kafkactl.client.consumer import Consumer
from tests import zygote
from tests.polling import wait_until

KCAT = shutil.which("kcat")
MODULE_BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


def _kafkactl(*args: str, input: bytes | None = None, timeout: float = 90
              ) -> subprocess.CompletedProcess[bytes]:
    return zygote.run(list(args), input=input, timeout=timeout)


def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    r = _kafkactl("topics", "create", "-t", topic, "--partitions", str(partitions),
                  "-b", bootstrap)
    assert r.returncode == 0, r.stderr


def _consume(bootstrap: str, topic: str, level: str) -> list[bytes]:
    r = _kafkactl("consume", "-t", topic, "-o", "earliest", "-e", "-q",
                  "--isolation-level", level, "-b", bootstrap)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def _kcat(bootstrap: str, topic: str, level: str) -> list[bytes]:
    assert KCAT is not None
    r = subprocess.run([KCAT, "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
                        "-q", "-X", f"isolation.level={level}"], capture_output=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def _log_end(bootstrap: str, topic: str) -> int:
    with Consumer(bootstrap_servers=bootstrap) as c:
        tp = (topic, 0)
        return c.end_offsets([tp])[tp]


def test_commits_every_n_records_in_order_and_kcat_agrees(module_broker: Any) -> None:
    b = module_broker.bootstrap
    _create(b, "txn-commit")
    lines = [f"line-{i}".encode() for i in range(1000)]
    r = _kafkactl("produce", "-t", "txn-commit", "--transactional-id", "loader-commit",
                  "--transaction-records", "300", "-b", b, input=b"\n".join(lines) + b"\n")
    assert r.returncode == 0, r.stderr
    assert b"1,000 records committed to txn-commit in 4 transactions" in r.stderr
    assert _consume(b, "txn-commit", "read_committed") == lines
    # the log holds the 1000 records and 4 COMMIT markers; no consumer prints a marker
    assert _log_end(b, "txn-commit") == 1004
    assert _consume(b, "txn-commit", "read_uncommitted") == lines
    if KCAT is not None:
        assert _kcat(b, "txn-commit", "read_committed") == lines


def test_seq_past_the_tables_in_one_transaction(module_broker: Any) -> None:
    """`seq 1 40000 | kafkactl produce --transactional-id`: short records, many more than
    the encoder tables' MAX_DELTA offset deltas fit a 1 MB batch; they land exactly, in
    batches of at most MAX_DELTA records (ProducerBatch._table_full), in input order."""
    from kafkactl.record.columns import MAX_DELTA
    from kafkactl.record.memory_records import iter_batches

    b = module_broker.bootstrap
    _create(b, "txn-seq")
    lines = [b"%d" % i for i in range(1, 40_001)]
    r = _kafkactl("produce", "-t", "txn-seq", "--transactional-id", "loader-seq", "-b", b,
                  input=b"\n".join(lines) + b"\n")
    assert r.returncode == 0, r.stderr
    assert b"40,000 records committed to txn-seq in 1 transaction" in r.stderr
    assert _consume(b, "txn-seq", "read_committed") == lines
    counts = [batch.record_count for batch in iter_batches(memoryview(b"".join(
        p.read_bytes() for p in sorted(module_broker.data_dir.glob("txn-seq-0/*.log")))))
        if not getattr(batch, "is_control", False)]
    assert sum(counts) == 40_000 and max(counts) <= MAX_DELTA


def test_sigint_mid_pipe_aborts_the_whole_input(module_broker: Any) -> None:
    b = module_broker.bootstrap
    _create(b, "txn-sigint")
    proc = subprocess.Popen([sys.executable, "-m", "kafkactl", "produce", "-t", "txn-sigint",
                             "--transactional-id", "loader-sigint", "-b", b,
                             "--linger-ms", "1"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    sent = [f"partial-{i}".encode() for i in range(500)]
    proc.stdin.write(b"\n".join(sent) + b"\n")
    proc.stdin.flush()
    # the records reach the log (in the open transaction) while the pipe stays open
    wait_until(lambda: _log_end(b, "txn-sigint") >= 500, 60,
               "the transaction's records in the log")
    assert _consume(b, "txn-sigint", "read_committed") == []
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"interrupted: the open transaction (500 records) was aborted" in err
    assert b"0 records committed" in err
    # read_committed: nothing; read_uncommitted: the aborted records (no marker)
    assert _consume(b, "txn-sigint", "read_committed") == []
    assert _consume(b, "txn-sigint", "read_uncommitted") == sent
    if KCAT is not None:
        assert _kcat(b, "txn-sigint", "read_committed") == []


def _json(bootstrap: str, *args: str) -> Any:
    r = _kafkactl("transactions", *args, "--json", "-b", bootstrap)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_sigterm_mid_pipe_aborts_the_open_transaction(module_broker: Any) -> None:
    """SIGTERM (kill, timeout, systemd, docker stop) stops a transactional produce as Ctrl-C
    does: the committed transactions stay, the open one is aborted at once (not left
    Ongoing for transaction.timeout.ms, holding back read_committed readers), the summary
    names the input record to resume from, and the exit status is 143."""
    b = module_broker.bootstrap
    _create(b, "txn-sigterm")
    proc = subprocess.Popen([sys.executable, "-m", "kafkactl", "produce", "-t", "txn-sigterm",
                             "--transactional-id", "loader-sigterm", "-b", b,
                             "--transaction-records", "100", "--linger-ms", "1"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    lines = [f"term-{i}".encode() for i in range(250)]
    proc.stdin.write(b"\n".join(lines) + b"\n")
    proc.stdin.flush()
    # two committed transactions (100 records and a marker each), 50 records in the open one
    wait_until(lambda: _log_end(b, "txn-sigterm") >= 252, 60, "the open transaction's records")
    assert _json(b, "describe", "-t", "loader-sigterm")["state"] == "Ongoing"
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err == (b"interrupted: the open transaction (50 records) was aborted; 200 records "
                   b"committed to txn-sigterm in 2 transactions; resume from input record "
                   b"201\n"), err
    # ended, not Ongoing: aborted (CompleteAbort; Empty once the producer's epoch is bumped)
    state = _json(b, "describe", "-t", "loader-sigterm")
    assert state["state"] in ("CompleteAbort", "Empty") and state["partitions"] == [], state
    assert "loader-sigterm" not in {t["transactional_id"]
                                    for t in _json(b, "list", "--state", "Ongoing")}
    # the ABORT marker is written: no open transaction holds the partition's LSO back
    wait_until(lambda: all(p["current_txn_start_offset"] == -1 for p in _json(
        b, "describe-producers", "--topic", "txn-sigterm", "--partition", "0")), 30,
        "the abort marker")
    assert _consume(b, "txn-sigterm", "read_committed") == lines[:200]
    assert _consume(b, "txn-sigterm", "read_uncommitted") == lines
    if KCAT is not None:
        assert _kcat(b, "txn-sigterm", "read_committed") == lines[:200]


class _AbortInterruptedProducer:
    """A transactional producer whose abort is cut short by a second Ctrl-C/SIGTERM."""

    transactions = None  # (no manager to tell of a refused record)

    def init_transactions(self) -> None: ...
    def begin_transaction(self) -> None: ...
    def commit_transaction(self) -> None: ...
    def abort(self) -> None: ...

    def abort_transaction(self, _timeout: float) -> None:
        raise KeyboardInterrupt


class _StoppedLines:
    """A LineProducer stand-in: three records handed over, then the stop signal."""

    def __init__(self) -> None:
        self.producer = _AbortInterruptedProducer()
        self.read = 0
        self.stats = type("Stats", (), {"start": 0.0, "bytes": 0, "first_error": None})()

    def send_all(self, pieces: Any) -> None:
        for piece in pieces:
            self.read += len(piece)
            raise KeyboardInterrupt


def test_an_abort_cut_short_is_not_reported_as_done(capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    """A second signal during the abort leaves the transaction to its coordinator's
    timeout: the summary says it was not aborted, never that it was."""
    import typer

    from kafkactl.cli.produce import _report_transactions
    from kafkactl.client.transactional_lines import AbortInterrupted, run_in_transactions

    lp = _StoppedLines()
    outcome = run_in_transactions(lp, iter([[b"a", b"b", b"c"]]))  # type: ignore[arg-type]
    assert outcome.interrupted and outcome.aborted == 3
    assert isinstance(outcome.abort_error, AbortInterrupted)
    with pytest.raises(typer.Exit) as stopped:
        _report_transactions(lp, "t", False, outcome, 143)  # type: ignore[arg-type]
    assert stopped.value.exit_code == 143
    assert capsys.readouterr().err == (
        "interrupted: the open transaction (3 records) was not aborted (interrupted): its "
        "coordinator aborts it when transaction.timeout.ms passes; 0 records committed to t "
        "in 0 transactions\n")


def test_an_invalid_transaction_timeout_is_named(module_broker: Any) -> None:
    """The coordinator's refusal of InitProducerId names its error and, for a timeout
    above transaction.max.timeout.ms, says so."""
    r = _kafkactl("produce", "-t", "txn-timeout", "--transactional-id", "loader-timeout",
                  "-X", "transaction.timeout.ms=1000000", "-b", module_broker.bootstrap,
                  input=b"1\n2\n3\n")
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(b"error: InitProducerId: INVALID_TRANSACTION_TIMEOUT "
                               b"(transaction.timeout.ms 1000000 is more than the broker's "
                               b"transaction.max.timeout.ms allows"), r.stderr
    assert b"0 records committed to txn-timeout in 0 transactions" in r.stderr


def test_an_empty_input_commits_no_transaction(module_broker: Any) -> None:
    b = module_broker.bootstrap
    r = _kafkactl("produce", "-t", "txn-empty", "--transactional-id", "loader-empty",
                  "-b", b, input=b"")
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(b"0 records committed to txn-empty in 0 transactions "), \
        r.stderr


def test_an_aborted_transaction_between_committed_ones(module_broker: Any) -> None:
    """Committed, aborted (Ctrl-C), committed again with the same transactional id:
    read_committed readers see the two committed inputs only, in order."""
    b = module_broker.bootstrap
    _create(b, "txn-mixed")
    first = [f"a-{i}".encode() for i in range(100)]
    r = _kafkactl("produce", "-t", "txn-mixed", "--transactional-id", "loader-mixed",
                  "-b", b, input=b"\n".join(first) + b"\n")
    assert r.returncode == 0, r.stderr
    proc = subprocess.Popen([sys.executable, "-m", "kafkactl", "produce", "-t", "txn-mixed",
                             "--transactional-id", "loader-mixed", "-b", b],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(b"".join(f"x-{i}\n".encode() for i in range(50)))
    proc.stdin.flush()
    wait_until(lambda: _log_end(b, "txn-mixed") >= 151, 60, "the open transaction's records")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    last = [f"c-{i}".encode() for i in range(100)]
    r = _kafkactl("produce", "-t", "txn-mixed", "--transactional-id", "loader-mixed",
                  "-b", b, input=b"\n".join(last) + b"\n")
    assert r.returncode == 0, r.stderr
    assert _consume(b, "txn-mixed", "read_committed") == first + last
    if KCAT is not None:
        assert _kcat(b, "txn-mixed", "read_committed") == first + last


def test_a_second_producer_fences_the_first(module_broker: Any) -> None:
    """Zombie fencing through the CLI: a producer whose transactional id was taken over
    stops with an error and none of its open transaction becomes visible."""
    b = module_broker.bootstrap
    _create(b, "txn-fence")
    zombie = subprocess.Popen([sys.executable, "-m", "kafkactl", "produce", "-t", "txn-fence",
                               "--transactional-id", "loader-fence", "-b", b],
                              stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert zombie.stdin is not None
    zombie.stdin.write(b"".join(f"z-{i}\n".encode() for i in range(20)))
    zombie.stdin.flush()
    wait_until(lambda: _log_end(b, "txn-fence") >= 20, 60, "the zombie's records")
    r = _kafkactl("produce", "-t", "txn-fence", "--transactional-id", "loader-fence",
                  "-b", b, input=b"new-1\nnew-2\n")
    assert r.returncode == 0, r.stderr
    zombie.stdin.write(b"z-late\n")
    zombie.stdin.close()
    assert zombie.stderr is not None
    zombie.wait(60)
    err = zombie.stderr.read()
    assert zombie.returncode == 1, err
    assert b"was taken over by another producer" in err, err
    assert _consume(b, "txn-fence", "read_committed") == [b"new-1", b"new-2"]


@pytest.mark.parametrize("args, message", [
    (["--transaction-records", "5"], b"--transaction-records goes with --transactional-id"),
    (["--transactional-id", "x", "--acks", "1"], b"acks=all"),
    (["--transactional-id", "x", "--failed-file", "/tmp/never"],
     b"--failed-file does not go with --transactional-id"),
    (["--transactional-id", "x", "--transaction-records", "0"], b"--transaction-records"),
])
def test_options_that_do_not_go_together(args: list[str], message: bytes) -> None:
    r = _kafkactl("produce", "-t", "t", "-b", "127.0.0.1:1", *args, input=b"a\n")
    assert r.returncode == 2, r.stderr
    assert message in r.stderr


def test_transactional_id_as_a_property(module_broker: Any) -> None:
    b = module_broker.bootstrap
    _create(b, "txn-prop")
    r = _kafkactl("produce", "-t", "txn-prop", "-X", "transactional.id=loader-prop",
                  "-X", "transaction.timeout.ms=30000", "-b", b, input=b"p1\np2\n")
    assert r.returncode == 0, r.stderr
    assert b"2 records committed to txn-prop in 1 transaction" in r.stderr
    assert _consume(b, "txn-prop", "read_committed") == [b"p1", b"p2"]
    r = _kafkactl("produce", "-t", "txn-prop", "-X", "transactional.id=a",
                  "--transactional-id", "b", "-b", b, input=b"x\n")
    assert r.returncode == 2
    assert b"disagree" in r.stderr


def test_isolation_level_flag_and_property_must_agree() -> None:
    r = _kafkactl("consume", "-t", "t", "-b", "127.0.0.1:1", "--isolation-level",
                  "read_committed", "-X", "isolation.level=read_uncommitted")
    assert r.returncode == 2
    assert b"disagree" in r.stderr
    r = _kafkactl("consume", "-t", "t", "-b", "127.0.0.1:1", "--isolation-level", "bogus")
    assert r.returncode == 2
    assert b"read_committed" in r.stderr
