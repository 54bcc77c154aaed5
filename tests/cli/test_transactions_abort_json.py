"""`kafkactl transactions abort --json` against a real broker: like every `transactions`
subcommand it takes --json, and prints one JSON object naming the partition and the
producer whose open transaction it aborted."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

from kafkactl.client.consumer import Consumer
from tests import zygote
from tests.polling import wait_until


def _kafkactl(*args: str) -> subprocess.CompletedProcess[bytes]:
    return zygote.run(list(args), timeout=60)


def _json(*args: str) -> Any:
    r = _kafkactl("transactions", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _log_end(bootstrap: str, topic: str) -> int:
    with Consumer(bootstrap_servers=bootstrap) as c:
        tp = (topic, 0)
        return c.end_offsets([tp])[tp]


def test_abort_json_by_start_offset_and_by_producer(module_broker: Any) -> None:
    b, topic = module_broker.bootstrap, "txn-abort-json"
    r = _kafkactl("topics", "create", "-t", topic, "-b", b)
    assert r.returncode == 0, r.stderr
    # an open transaction: a transactional produce whose pipe stays open
    proc = subprocess.Popen([sys.executable, "-m", "kafkactl", "produce", "-t", topic,
                             "--transactional-id", "loader-abort-json", "-b", b,
                             "--linger-ms", "1"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"a\nb\nc\n")
        proc.stdin.flush()
        wait_until(lambda: _log_end(b, topic) >= 3, 60, "the open transaction's records")
        (open_txn,) = _json("describe-producers", "--topic", topic, "--partition", "0",
                            "-b", b)
        assert open_txn["current_txn_start_offset"] == 0

        aborted = _json("abort", "--topic", topic, "--partition", "0", "--start-offset", "0",
                        "-b", b)
        assert aborted == {"topic": topic, "partition": 0,
                           "producer_id": open_txn["producer_id"],
                           "producer_epoch": open_txn["producer_epoch"],
                           "coordinator_epoch": max(open_txn["coordinator_epoch"], 0),
                           "start_offset": 0}
        (after,) = _json("describe-producers", "--topic", topic, "--partition", "0", "-b", b)
        assert after["current_txn_start_offset"] == -1

        # the producer's ids instead of the start offset: start_offset is null
        ids = ["--producer-id", str(open_txn["producer_id"]), "--producer-epoch",
               str(open_txn["producer_epoch"]), "--coordinator-epoch",
               str(aborted["coordinator_epoch"])]
        again = _json("abort", "--topic", topic, "--partition", "0", *ids, "-b", b)
        assert again == {**aborted, "start_offset": None}

        # a refusal stays an `error:` line on stderr (exit 1), with or without --json
        r = _kafkactl("transactions", "abort", "--topic", topic, "--partition", "0",
                      "--start-offset", "0", "--json", "-b", b)
        assert r.returncode == 1 and r.stdout == b"", r.stderr
        assert r.stderr == (f"error: no open transaction starts at offset 0 of {topic}-0\n"
                            .encode()), r.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
