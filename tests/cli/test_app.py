"""Rules that hold for every `kafkactl` command: a closed stdout ends it quietly with exit 0,
errors start with `error: `, `--help` shows no value after flags, one group flag, tables at
full width when piped, a second broker on a locked data dir is one clear error."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from tests import zygote

KAFKACTL = [sys.executable, "-m", "kafkactl"]


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), input=stdin.decode(), text=True, timeout=120)


def run_with_closed_stdout(*args: str) -> tuple[int, str]:
    """Run with a stdout pipe whose reader is gone before the command starts (what
    `| head -1` becomes once head has exited), so every write to stdout gets EPIPE."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(KAFKACTL + list(args), stdout=w, stderr=subprocess.PIPE,
                           timeout=120)
    finally:
        os.close(w)
    return p.returncode, p.stderr.decode()


def _help_commands() -> list[list[str]]:
    return [["--help"], ["serve", "--help"], ["topics", "--help"],
            *[["topics", c, "--help"] for c in ("create", "list", "describe", "delete", "alter")],
            ["produce", "--help"], ["consume", "--help"], ["dump-log", "--help"],
            ["recover", "--help"], ["rebalance", "--help"],
            *[["offsets", c, "--help"] for c in ("show", "reset", "delete")]]


@pytest.mark.parametrize("args", _help_commands(), ids=lambda a: " ".join(a))
def test_help_shows_no_value_type_after_flags(args: list[str]) -> None:
    r = run(*args)
    assert r.returncode == 0, r.stderr
    assert "<bool>" not in r.stdout, r.stdout
    assert re.search(r"--help\s+-h\s+Show this message", r.stdout), r.stdout


def test_help_still_shows_value_types_of_options_that_take_one() -> None:
    out = run("consume", "--help").stdout
    assert re.search(r"--from-beginning\s+Start at the earliest", out), out
    assert re.search(r"--max-messages\s+-c\s+<int>", out), out


def test_one_group_flag() -> None:
    out = run("consume", "--help").stdout
    assert "needs group support" not in out
    for args in (["consume"], ["rebalance"], ["offsets", "show"], ["offsets", "reset"],
                 ["offsets", "delete"]):
        out = run(*args, "--help").stdout
        assert re.search(r"--group\s+-G,-g\s", out), (args, out)


def test_usage_errors_use_the_one_error_style() -> None:
    r = run("consume", "--no-such-flag")
    assert r.returncode == 2
    assert "error: No such option: --no-such-flag" in r.stderr, r.stderr
    assert "Error" not in r.stderr and "╭" not in r.stderr
    r = run("produce")
    assert r.returncode == 2 and "error: Missing option '--topic'" in r.stderr, r.stderr
    r = run("serve", "--override", "no-equals-sign")
    assert r.returncode == 2 and r.stderr.startswith("error: "), r.stderr


# -- one EPIPE rule: `cmd | head` stops quietly with exit 0 ------------------------------------

@pytest.fixture(scope="module")
def _populated_once(_module_broker_process: Any) -> Any:
    broker = _module_broker_process
    r = run("topics", "create", "-b", broker.bootstrap, "-t", "pipe", "--partitions", "2")
    assert r.returncode == 0, r.stderr
    r = run("produce", "-b", broker.bootstrap, "-t", "pipe", "-p", "0", "-q",
            stdin=b"".join(b"line %d\n" % i for i in range(2000)))
    assert r.returncode == 0, r.stderr
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="pipers",
                      enable_auto_commit=False, consumer_timeout_ms=10000)
    c.assign([TopicPartition("pipe", 0)])
    c.seek_to_beginning()
    next(iter(c))
    c.commit()
    c.close()
    return broker


@pytest.fixture
def populated(_populated_once: Any, module_broker: Any) -> Any:
    """A topic "pipe" (2,000 records) and a group "pipers" with a committed offset, made once
    for the module: the tests below only read them (or reset the group's offset, which no
    other test here looks at)."""
    return module_broker


@pytest.mark.parametrize("args", [
    ["topics", "list"], ["topics", "describe"], ["topics", "list", "--json"],
    ["offsets", "show", "-G", "pipers"], ["offsets", "show", "--all", "--json"],
    ["rebalance", "-G", "pipers"], ["rebalance", "-G", "pipers", "--json"],
    ["offsets", "reset", "-G", "pipers", "--to-earliest"],
], ids=lambda a: " ".join(a))
def test_closed_stdout_client_commands(populated: Any, args: list[str]) -> None:
    code, err = run_with_closed_stdout(*args, "-b", populated.bootstrap)
    assert code == 0, err
    assert "Traceback" not in err and "Broken pipe" not in err and "rror" not in err, err


def test_closed_stdout_consume_counts_nothing_written(populated: Any) -> None:
    code, err = run_with_closed_stdout("consume", "-b", populated.bootstrap, "-t", "pipe",
                                       "--from-beginning", "-e")
    assert code == 0, err
    assert re.fullmatch(r"Processed a total of 0 messages in [0-9.]+ s\n", err), err


def test_closed_stdout_offline_commands(broker: Any) -> None:
    r = run("produce", "-b", broker.bootstrap, "-t", "off", "-q",
            stdin=b"".join(b"record %d\n" % i for i in range(500)))
    assert r.returncode == 0, r.stderr
    assert broker.stop() == 0
    part = broker.data_dir / "off-0"
    seg = sorted(part.glob("*.log"))[0]
    for args in (["dump-log", str(seg), "--print-data-log"], ["dump-log", str(seg), "--json"],
                 ["recover", str(broker.data_dir)], ["recover", str(part), "--dry-run"],
                 ["recover", str(broker.data_dir), "--json"]):
        code, err = run_with_closed_stdout(*args)
        assert code == 0, (args, err)
        assert err == "", (args, err)


def test_consume_into_head_counts_what_was_written(broker: Any) -> None:
    """`consume | head -3`: exit 0, and the summary counts the records written to the
    pipe before head went away, not every record read."""
    total = 200_000
    r = run("produce", "-b", broker.bootstrap, "-t", "many", "-q",
            stdin=b"".join(b"%06d\n" % i for i in range(total)))
    assert r.returncode == 0, r.stderr
    p = subprocess.Popen(KAFKACTL + ["consume", "-b", broker.bootstrap, "-t", "many",
                                     "--from-beginning", "-e"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    head = [p.stdout.readline() for _ in range(3)]
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(60) == 0, err
    assert head == [b"000000\n", b"000001\n", b"000002\n"]
    m = re.fullmatch(r"Processed a total of ([0-9,]+) messages in [0-9.]+ s\n", err)
    assert m, err
    written = int(m.group(1).replace(",", ""))
    assert 3 <= written < total


def test_topics_json(broker: Any) -> None:
    r = run("topics", "create", "-b", broker.bootstrap, "-t", "j", "--partitions", "2",
            "--config", "retention.ms=60000")
    assert r.returncode == 0, r.stderr
    r = run("topics", "list", "-b", broker.bootstrap, "--json")
    assert r.returncode == 0 and "j" in json.loads(r.stdout)
    r = run("topics", "describe", "-b", broker.bootstrap, "-t", "j", "--json")
    assert r.returncode == 0, r.stderr
    [doc] = json.loads(r.stdout)
    assert doc["topic"] == "j" and doc["partition_count"] == 2
    assert doc["configs"] == {"retention.ms": "60000"}
    assert [p["partition"] for p in doc["partitions"]] == [0, 1]


def test_piped_tables_are_full_width(broker: Any) -> None:
    """`recover` piped (not a terminal): no name is cut to fit 80 columns."""
    topic = "a-topic-with-a-long-name-" + "x" * 70
    r = run("produce", "-b", broker.bootstrap, "-t", topic, "-q", stdin=b"v\n")
    assert r.returncode == 0, r.stderr
    assert broker.stop() == 0
    r = zygote.run(["recover", str(broker.data_dir), "--all"], text=True, timeout=60,
                   env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    assert f"{topic}-0" in r.stdout, r.stdout


def test_second_broker_on_a_locked_data_dir(broker: Any, tmp_path: Path) -> None:
    from tests.conftest import free_port

    r = zygote.run(["serve", "--data-dir", str(broker.data_dir), "--listen",
                    f"127.0.0.1:{free_port()}"], text=True, timeout=60)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ") and "in use by another process" in lines[0]
    assert "stopped cleanly" not in r.stderr


def test_a_command_runs_with_only_its_module_and_help_lists_every_command() -> None:
    from kafkactl.cli import app as cli

    only = typer.main.get_command(cli.app_for(["dump-log", "--help"]))
    assert sorted(only.commands) == ["dump-log"]  # type: ignore[attr-defined]
    assert sorted(typer.main.get_command(cli.app_for(["topics"])).commands) == ["topics"]  # type: ignore[attr-defined]
    every = {m.replace("_", "-") for m in cli.SUBCOMMAND_MODULES}
    for args in ([], ["--help"], ["-V"], ["no-such-command"]):
        assert set(typer.main.get_command(cli.app_for(args)).commands) == every  # type: ignore[attr-defined]
    # the same command line parses and fails alike either way
    typo = run("topics", "lst")
    assert typo.returncode == 2 and "error: No such command 'lst'." in typo.stderr
