"""SIGTERM to `kafkactl produce` while its broker is gone: the records still waiting are
not acknowledged, and the summary says the run was interrupted before the broker
acknowledged them, exit 143 as for any SIGTERM (it said "the producer was closed before
delivery" and exited 1, as for a failure). A real broker, killed once the first record is
in; the rest of the input is read (stdin closed) and waits for it (the outage notice says
so) when the SIGTERM comes."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

from tests.groups.helpers import read_lines
from tests.polling import wait_until


def _end_offset(bootstrap: str) -> int:
    r = subprocess.run([sys.executable, "-m", "kafkactl", "topics", "offsets", "-t", "out",
                        "-b", bootstrap], capture_output=True, text=True, timeout=60)
    if r.returncode != 0 or not r.stdout.split():
        return -1
    return int(r.stdout.split()[-1].rsplit(":", 1)[1])


def test_sigterm_while_the_broker_is_gone_is_a_stop(broker: Any) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "kafkactl", "produce", "-t", "out",
                             "-b", broker.bootstrap], stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stderr is not None
    lines: list[bytes] = []
    reader = read_lines(proc.stderr, lines)
    try:
        proc.stdin.write(b"first\n")
        proc.stdin.flush()
        wait_until(lambda: _end_offset(broker.bootstrap) == 1, 60, "the first record")
        broker.kill()
        proc.stdin.write(b"".join(b"r%d\n" % i for i in range(100)))
        proc.stdin.close()
        wait_until(lambda: any(b"unreachable" in ln for ln in lines), 60,
                   "produce saying the broker is unreachable")
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
        reader.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = b"".join(lines).decode()
    assert rc == 143, err
    assert "1 of 101 records acknowledged, 100 not: interrupted before the broker " \
           "acknowledged them" in err, err
