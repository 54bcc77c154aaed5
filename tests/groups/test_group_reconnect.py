"""`kafkactl consume -G` through a broker restart: it reconnects, rejoins and goes on from
where it was; with the broker gone for good it gives up after max.poll.interval.ms."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from tests.groups.helpers import FAST, kafkactl, read_lines, wait_until


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    r = subprocess.run([sys.executable, "-m", "kafkactl", "produce", "-t", topic, "-q",
                        "-b", bootstrap], input="".join(f"{v}\n" for v in values).encode(),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr


@contextlib.contextmanager
def _consuming(*args: str) -> Iterator[tuple[subprocess.Popen[bytes], list[bytes],
                                              list[bytes]]]:
    """`kafkactl consume ARGS` with its stdout and stderr lines collected as they come;
    stopped with SIGINT (as Ctrl-C) on the way out, and waited for."""
    p = subprocess.Popen([sys.executable, "-m", "kafkactl", "consume", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    lines: list[bytes] = []
    errors: list[bytes] = []
    reader, err_reader = read_lines(p.stdout, lines), read_lines(p.stderr, errors)
    try:
        yield p, lines, errors
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(60)
        reader.join(30)
        err_reader.join(30)


def test_group_consumer_survives_a_broker_restart(broker_factory: Any) -> None:
    b = broker_factory(**FAST)
    first = [f"before-{i}" for i in range(100)]
    _produce(b.bootstrap, "restarted", first)
    with _consuming("-t", "restarted", "-G", "rg", "--from-beginning", "-b",
                    b.bootstrap) as (p, lines, errors):
        wait_until(lambda: len(lines) >= 100, 60, "the first 100 records")
        b.stop()  # down until the consumer has noticed (its heartbeat fails)
        wait_until(lambda: any(b"lost its coordinator" in e for e in errors), 60,
                   "the consumer noticing the broker is gone")
        b.start()
        second = [f"after-{i}" for i in range(100)]
        _produce(b.bootstrap, "restarted", second)
        wait_until(lambda: len(lines) >= 200, 120, "the records produced after the restart")
        assert p.poll() is None  # still running
    err = b"".join(errors).decode()
    assert p.returncode == 0, err
    assert [x.decode().rstrip("\n") for x in lines] == first + second  # no gap, no repeat
    shown = kafkactl("offsets", "show", "-G", "rg", "--json", "-b", b.bootstrap)
    assert [row["current_offset"] for row in json.loads(shown.stdout)] == [200], (
        shown.stdout, shown.stderr, err)


def test_group_consumer_gives_up_after_max_poll_interval(broker_factory: Any) -> None:
    b = broker_factory(**FAST)
    _produce(b.bootstrap, "gone", ["x"])
    p = subprocess.Popen([sys.executable, "-m", "kafkactl", "consume", "-t", "gone", "-G",
                          "gg", "--from-beginning", "-X", "max.poll.interval.ms=3000",
                          "-b", b.bootstrap], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    assert p.stdout.readline() == b"x\n"
    b.kill()
    try:
        rc = p.wait(120)
    finally:
        p.kill()
    err = p.stderr.read().decode()
    assert rc == 1, err
    assert "no broker of the cluster could be reached for" in err, err
    assert "the limit is max.poll.interval.ms, 3000 ms" in err, err
    assert "Traceback" not in err


def test_a_consumer_without_a_group_says_the_broker_is_gone(broker_factory: Any) -> None:
    """A plain `consume` (no -G) through a broker restart: it says it cannot fetch (it no
    longer waits in silence), says when it fetches again, and prints what came after."""
    b = broker_factory(**FAST)
    _produce(b.bootstrap, "plain-restart", ["before"])
    with _consuming("-t", "plain-restart", "--from-beginning", "-b",
                    b.bootstrap) as (p, lines, errors):
        wait_until(lambda: lines == [b"before\n"], 60, "the first record")
        b.stop()
        wait_until(lambda: any(b"cannot fetch from broker" in e for e in errors), 60,
                   "the notice that the broker is gone")
        b.start()
        _produce(b.bootstrap, "plain-restart", ["after"])
        wait_until(lambda: len(lines) >= 2, 120, "the record produced after the restart")
        wait_until(lambda: any(b"fetching again" in e for e in errors), 30,
                   "the notice that it fetches again")
    assert p.returncode == 0
    assert lines == [b"before\n", b"after\n"]
    assert b"Traceback" not in b"".join(errors)


def test_a_group_consumer_started_before_its_broker_waits_for_it(broker_factory: Any) -> None:
    """Started before the broker (a container that comes up first): it says it cannot
    reach the cluster yet (it said it "lost its coordinator", which it never had), and
    reads once the broker is up."""
    b = broker_factory(**FAST)
    _produce(b.bootstrap, "early", ["one"])
    b.stop()
    with _consuming("-t", "early", "-G", "eg", "--from-beginning", "-b",
                    b.bootstrap) as (_p, lines, errors):
        wait_until(lambda: any(b"group eg: cannot reach the cluster yet" in e
                               for e in errors), 60, "the consumer saying it waits")
        assert not any(b"lost its coordinator" in e for e in errors), errors
        b.start()
        _produce(b.bootstrap, "early", ["two"])
        wait_until(lambda: len(lines) >= 2, 120, "the records, once the broker is up")
    assert [x.decode().rstrip("\n") for x in lines] == ["one", "two"]
