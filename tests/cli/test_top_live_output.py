"""`kafkactl top`'s live view when stdout is not a terminal (`top -i 1 > file`, `| tee`):
each refresh's tables are printed as they come (plain text, flushed, no cursor movement),
and SIGTERM or SIGINT ends the view with status 0 and every frame printed so far whole
(rich's Live, meant for a terminal, printed nothing before the end, and nothing at all on
SIGTERM). With --json, SIGTERM also ends it with status 0."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess
from tests.polling import wait_until


def start_top(out: Path, *args: str) -> subprocess.Popen[bytes]:
    with open(out, "wb") as f:
        return subprocess.Popen([sys.executable, "-m", "kafkactl", "top", *args],
                                stdout=f, stderr=subprocess.PIPE)


def frames(out: Path) -> int:
    return out.read_text().count("Consumer groups")


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_tables_are_printed_per_refresh_and_a_stop_signal_exits_0(
        module_broker: BrokerProcess, tmp_path: Path, stop: signal.Signals) -> None:
    out = tmp_path / "top.txt"
    proc = start_top(out, "--interval", "0.2", "-b", module_broker.bootstrap)
    try:
        wait_until(lambda: frames(out) >= 3 or proc.poll() is not None, 60,
                   "three frames written to the file while top runs")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(stop)
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = out.read_text()
    assert "\x1b[" not in text  # plain: no colours, no cursor movement
    assert text.count("Brokers") == text.count("Topics") == text.count("Consumer groups")
    assert text.count("Brokers") >= 3
    assert module_broker.bootstrap in text and "under-replicated partitions" in text
    assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()


def test_live_json_ends_with_status_0_on_sigterm(module_broker: BrokerProcess,
                                                 tmp_path: Path) -> None:
    out = tmp_path / "top.json"
    proc = start_top(out, "--json", "--interval", "0.2", "-b", module_broker.bootstrap)
    try:
        wait_until(lambda: out.read_text().count("\n") >= 2 or proc.poll() is not None, 60,
                   "two documents")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for line in out.read_text().splitlines():  # every document whole
        assert json.loads(line)["source"] == "protocol"
