"""`kafkactl produce`'s input and its byte-valued options, as given:

- a non-blocking stdin (O_NONBLOCK on a pipe shared with a supervisor) is read to its end,
  not taken for the end at the first "nothing yet" (it was: the rest silently lost, exit 0);
- -K, -D and -H values are the argument's own bytes, whatever the locale: not re-encoded as
  UTF-8 in a Latin-1 one, and bytes that are not UTF-8 in a UTF-8 one are taken (they gave
  tracebacks or "surrogates not allowed"); a header key, a topic name, a client.id that
  cannot be sent are refused before anything is read, and a bad escape is shown as typed;
- -p -1 is kcat's "the partitioner picks"; below it a usage error before reading.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess
from tests.polling import wait_until
from tests.sockets import end_offset

KAFKACTL = [sys.executable, "-m", "kafkactl"]


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker  # every test uses topics of its own


def _produce(bootstrap: str, topic: str | bytes, data: bytes, *args: str | bytes,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*KAFKACTL, "produce", "-b", bootstrap, "-t", topic, *args],
                          input=data, capture_output=True, timeout=120, env=env)


def _records(bootstrap: str, topic: str, n: int) -> list[tuple[Any, Any, Any]]:
    """(key, value, headers) of the first `n` records of partition 0."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      consumer_timeout_ms=10000)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        for m in c:
            got.append((m.key, m.value, m.headers))
            if len(got) == n:
                break
        return got
    finally:
        c.close()


def test_a_non_blocking_stdin_is_read_to_its_end(broker: BrokerProcess) -> None:
    r, w = os.pipe()
    os.set_blocking(r, False)  # (the open pipe's flag: kafkactl's stdin has it too)
    proc = subprocess.Popen([*KAFKACTL, "produce", "-b", broker.bootstrap, "-t", "nb",
                             "--linger-ms", "0"], stdin=r, stderr=subprocess.PIPE)
    os.close(r)
    try:
        os.write(w, b"first\n")
        # kafkactl has read it and waits for more (it stopped reading here, exit 0)
        wait_until(lambda: proc.poll() is not None or end_offset(broker.bootstrap,
                                                                  "nb") == 1,
                   60, "the first record")
        with contextlib.suppress(BrokenPipeError):  # (gone: the old end of input)
            os.write(w, b"second\n")
        os.close(w)
        w = -1
        _, err = proc.communicate(timeout=60)
    finally:
        if w >= 0:
            os.close(w)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert b"2 of 2 records acknowledged" in err, err
    assert [v for _k, v, _h in _records(broker.bootstrap, "nb", 2)] == [b"first", b"second"]


def test_non_utf8_bytes_in_options_are_taken_as_given(broker: BrokerProcess) -> None:
    """In a UTF-8 locale: a byte that is not UTF-8 (surrogateescape'd in argv) in -K, -D
    and an -H value is that byte."""
    r = _produce(broker.bootstrap, "u8", b"k\xe9v\xffnokey\xff", "-K", b"\xe9",
                 "-D", b"\xff", "-H", b"h=\xe9\x80", "-q")
    assert r.returncode == 0, r.stderr
    assert r.stderr == b""
    assert _records(broker.bootstrap, "u8", 2) == [
        (b"k", b"v", [("h", b"\xe9\x80")]), (None, b"nokey", [("h", b"\xe9\x80")])]


def _latin1_env(tmp_path: Path) -> dict[str, str]:
    loc = tmp_path / "locales"
    loc.mkdir()
    made = subprocess.run(["localedef", "-i", "en_US", "-f", "ISO-8859-1",
                           str(loc / "en_US.ISO-8859-1")], capture_output=True, timeout=120)
    if made.returncode not in (0, 1) or not (loc / "en_US.ISO-8859-1").exists():
        pytest.skip(f"no ISO-8859-1 locale could be made: {made.stderr!r}")
    env = {**os.environ, "LOCPATH": str(loc), "LC_ALL": "en_US.ISO-8859-1"}
    check = subprocess.run([sys.executable, "-c",
                            "import sys; print(sys.getfilesystemencoding())"],
                           capture_output=True, text=True, env=env, timeout=60)
    if check.stdout.strip() != "iso8859-1":
        pytest.skip(f"the ISO-8859-1 locale is not taken: {check.stdout!r}")
    return env


def test_option_bytes_in_a_latin1_locale_are_not_re_encoded(broker: BrokerProcess,
                                                            tmp_path: Path) -> None:
    """`-K é` typed in a Latin-1 terminal is the byte E9, as kcat takes it (it was
    re-encoded as UTF-8, C3 A9, and split nothing); so for -D and -H values."""
    env = _latin1_env(tmp_path)
    r = _produce(broker.bootstrap, "l1", b"key\xe9val\xfeother\xfe", "-K", b"\xe9",
                 "-D", b"\xfe", "-H", b"h\xe9=\xe9", "-q", env=env)
    assert r.returncode == 0, r.stderr
    # (a header key is a string: é is the character, sent as UTF-8)
    assert _records(broker.bootstrap, "l1", 2) == [
        (b"key", b"val", [("h\u00e9", b"\xe9")]), (None, b"other", [("h\u00e9", b"\xe9")])]


@pytest.mark.parametrize(("args", "message"), [
    (["-t", b"t\xff"], "-t/--topic 't\\xff': the name has characters a topic name may not "
                       "have: '\\xff'"),
    (["-t", "a b"], "-t/--topic 'a b': the name has characters a topic name may not have: "
                    "' '"),
    (["-t", "x" * 250], "is 250 characters long, more than 249"),
    (["-t", "ok", "-X", b"client.id=\xff"], "-X client.id='\\xff': not text in this "
                                            "locale's encoding"),
    (["-t", "ok", "-H", b"h\xff=v"], "header 'h\\xff=v': the key is not text"),
    (["-t", "ok", "-D", "\\x"], "bad escape in '\\x': "),
    (["-t", "ok", "-p", "-2"], "-p/--partition -2: a partition is 0 or more"),
], ids=["topic-bytes", "topic-space", "topic-long", "client-id", "header-key", "escape",
        "partition"])
def test_what_cannot_be_sent_is_refused_before_reading(broker: BrokerProcess,
                                                       args: list[str | bytes],
                                                       message: str) -> None:
    r = subprocess.run([*KAFKACTL, "produce", "-b", broker.bootstrap, *args],
                       input=b"never read\n", capture_output=True, timeout=120)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 2, err
    assert "Traceback" not in err, err
    assert message in err, err


def test_partition_minus_one_is_the_partitioner(broker: BrokerProcess) -> None:
    """kcat's -p -1 (RD_KAFKA_PARTITION_UA): each key where the partitioner puts it."""
    made = subprocess.run([*KAFKACTL, "topics", "create", "-b", broker.bootstrap, "-t",
                           "pm1", "--partitions", "4"], capture_output=True, timeout=60)
    assert made.returncode == 0, made.stderr
    data = b"".join(b"k%d:v%d\n" % (i, i) for i in range(40))
    r = _produce(broker.bootstrap, "pm1", data, "-K", ":", "-p", "-1")
    assert r.returncode == 0, r.stderr
    assert b"40 of 40 records acknowledged" in r.stderr, r.stderr
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        ends = c.end_offsets([TopicPartition("pm1", p) for p in range(4)])
    finally:
        c.close()
    assert sum(ends.values()) == 40
    assert sum(1 for n in ends.values() if n) > 1  # (spread, not all to one partition)
