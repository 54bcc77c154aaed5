"""A write to stdout that fails for another reason than its reader going away (the real
/dev/full, a file over RLIMIT_FSIZE, stdout closed) ends the command with one line,
`error: cannot write to stdout: <why>`, and exit status 1, never a traceback; a group
consumer commits exactly the records written before it. A closed stdin is said to be
closed. Fresh interpreters with the shell's redirections, as a user runs them."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests import zygote
from tests.conftest import BrokerProcess

KAFKACTL = [sys.executable, "-m", "kafkactl"]
FULL = "error: cannot write to stdout: No space left on device"
CLOSED = ("error: cannot write to stdout: Bad file descriptor (stdout is closed or not "
          "open for writing)")
RECORDS = "".join(f"{i:04d}\n" for i in range(2000))  # 5 bytes a record


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests here only use topics and groups of their own: one broker for the module."""
    return module_broker


@pytest.fixture
def topic(broker: BrokerProcess) -> str:
    name = "full-" + os.urandom(4).hex()
    r = zygote.run(["produce", "-t", name, "-b", broker.bootstrap, "-q"], input=RECORDS,
                   text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return name


def shell(redirect: str, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    """`kafkactl ARGS REDIRECT` in bash (`> /dev/full`, `>&-`, `<&-`)."""
    line = 'exec "$@" ' + redirect
    return subprocess.run(["bash", "-c", line, "kafkactl", *KAFKACTL, *args],
                          capture_output=True, text=True, timeout=90, **kw)  # type: ignore


def committed(broker: BrokerProcess, group: str) -> list[tuple[str, int]]:
    r = zygote.run(["offsets", "show", "-G", group, "--json", "-b", broker.bootstrap],
                   text=True, timeout=60)
    if r.returncode != 0:  # no such group: nothing committed
        return []
    return [(g["topic"], g["current_offset"]) for g in json.loads(r.stdout)]


def assert_one_error(r: subprocess.CompletedProcess[str], line: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1] == line, r.stderr


@pytest.mark.parametrize("how", [[], ["-J"], ["-f", "%o %s\\n"]])
def test_consume_to_dev_full(broker: BrokerProcess, topic: str, how: list[str]) -> None:
    r = shell("> /dev/full", "consume", "-t", topic, "-o", "beginning", "-e", "-b",
              broker.bootstrap, *how)
    assert_one_error(r, FULL)
    assert r.stderr.strip().splitlines() == [FULL]  # nothing written: no summary


def test_a_group_commits_nothing_it_could_not_write(broker: BrokerProcess,
                                                    topic: str) -> None:
    group = f"g-{topic}"
    r = shell("> /dev/full", "consume", "-t", topic, "-o", "beginning", "-e", "-G", group,
              "-b", broker.bootstrap)
    assert_one_error(r, FULL)
    assert all(offset == 0 for _, offset in committed(broker, group))
    r = zygote.run(["consume", "-t", topic, "-o", "beginning", "-e", "-q", "-G", group,
                    "-b", broker.bootstrap], text=True, timeout=90)
    assert r.returncode == 0 and r.stdout == RECORDS, r.stderr  # all of them, once


def test_a_group_commits_what_a_full_disk_took(broker: BrokerProcess, topic: str,
                                               tmp_path: Path) -> None:
    """A file that may not grow past 4096 bytes (RLIMIT_FSIZE; Python ignores SIGXFSZ): the
    write stops inside a record, the records wholly written are committed."""
    group = f"g-{topic}"
    out = tmp_path / "out"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    r = shell(f"> {out}", "consume", "-t", topic, "-o", "beginning", "-e", "-G", group,
              "-b", broker.bootstrap, preexec_fn=limit)
    assert_one_error(r, "error: cannot write to stdout: File too large")
    written = out.read_bytes()
    assert len(written) == 4096 and RECORDS.encode().startswith(written)
    whole = written.count(b"\n")
    assert r.stderr.splitlines()[0].startswith(f"Processed a total of {whole:,} messages")
    assert committed(broker, group) == [(topic, whole)]


def test_consume_to_a_closed_stdout_fails_before_joining(broker: BrokerProcess,
                                                         topic: str) -> None:
    group = f"g-{topic}"
    r = shell(">&-", "consume", "-t", topic, "-o", "beginning", "-e", "-G", group, "-b",
              broker.bootstrap)
    assert_one_error(r, CLOSED)
    r = zygote.run(["offsets", "list", "-b", broker.bootstrap], text=True, timeout=60)
    assert group not in r.stdout.split()


@pytest.mark.parametrize("args", [["topics", "list"], ["topics", "describe"]])
def test_tables_to_dev_full_or_a_closed_stdout(broker: BrokerProcess, topic: str,
                                               args: list[str]) -> None:
    r = shell("> /dev/full", *args, "-b", broker.bootstrap)
    assert_one_error(r, FULL)
    r = shell(">&-", *args, "-b", broker.bootstrap)
    assert_one_error(r, CLOSED)


def test_a_closed_stderr_changes_nothing(broker: BrokerProcess, topic: str) -> None:
    r = shell("2>&-", "consume", "-t", topic, "-o", "beginning", "-e", "-b",
              broker.bootstrap)
    assert r.returncode == 0 and r.stdout == RECORDS


@pytest.mark.parametrize("args", [["produce", "-t", "never"], ["users", "add", "bob"]])
def test_a_closed_stdin_is_said_to_be_closed(args: list[str]) -> None:
    r = shell("<&-", *args, "-b", "127.0.0.1:1")
    assert_one_error(r, "error: cannot read stdin: it is closed")
