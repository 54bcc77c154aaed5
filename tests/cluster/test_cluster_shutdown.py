"""Every broker of a 3-broker cluster stopped at once (SIGTERM to all, a replicated topic
led everywhere): each stops within controlled.shutdown.max.retries × retry.backoff + 5 s,
whichever broker becomes controller meanwhile, and no log line says a controller was
unreachable without saying why."""

from __future__ import annotations

import re
import signal
import subprocess
from typing import Any

import pytest

from tests import zygote
from tests.cluster.cluster_helpers import start_cluster

RETRIES = 2
BACKOFF_MS = 1000
BOUND_S = RETRIES * BACKOFF_MS / 1000 + 5


@pytest.mark.parametrize("rounds", [2])
def test_brokers_stopped_together_stop_within_the_controlled_shutdown_bound(
        broker_factory: Any, zookeeper: Any, rounds: int) -> None:
    cluster = start_cluster(broker_factory, zookeeper,
                            controlled_shutdown_max_retries=str(RETRIES),
                            controlled_shutdown_retry_backoff_ms=str(BACKOFF_MS))
    r = zygote.run(["topics", "create", "-b", cluster.bootstrap, "-t", "spread",
                    "--partitions", "12", "--replication-factor", "3"], text=True,
                   timeout=60)
    assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders("spread", 12)
    for round_ in range(rounds):
        if round_:
            for b in cluster.brokers.values():
                b.start()
            cluster.wait_for_leaders("spread", 12)
        procs = [b.proc for b in cluster.brokers.values()]
        for proc in procs:
            assert proc is not None
            proc.send_signal(signal.SIGTERM)
        slow = []
        for i, proc in zip(cluster.brokers, procs, strict=True):
            assert proc is not None
            try:
                proc.wait(BOUND_S)
            except subprocess.TimeoutExpired:
                slow.append(i)
                proc.kill()
                proc.wait()
        logs = {i: b.log() for i, b in cluster.brokers.items()}
        assert not slow, f"brokers {slow} took more than {BOUND_S:g} s to stop:\n" + \
            "\n".join(logs[i][-3000:] for i in slow)
        for i, text in logs.items():
            assert "has not exited" not in text, \
                f"broker {i}: a thread outlived its clean stop:\n{text[-6000:]}"
            assert not re.search(r"\(\)\s*$", text, re.MULTILINE), \
                f"broker {i} logged an error without its message:\n{text[-3000:]}"
