"""`kafkactl cluster verify-replicas` on a single-replica partition says there is nothing
to compare (it said "up to offset 0 (0 batches) ok" for 29k records: issue 30 item 10)."""

from __future__ import annotations

import json
from typing import Any

from tests import zygote


def test_a_single_replica_has_nothing_to_compare(broker: Any) -> None:
    b = ["-b", broker.bootstrap]
    lines = "".join(f"{i}\n" for i in range(29000))
    r = zygote.run(["produce", "-t", "solo", "-q", *b], input=lines, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = zygote.run(["cluster", "verify-replicas", "-t", "solo", *b], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "solo-0\treplicas 0\tone replica: nothing to compare\n"
    assert "up to offset 0" not in r.stdout
    r = zygote.run(["cluster", "verify-replicas", "-t", "solo", "--json", *b], text=True,
                   timeout=60)
    (row,) = json.loads(r.stdout)
    assert row["compared"] is False and row["checked_up_to"] is None
    assert row["diverged_at"] is None and row["errors"] == {}


def test_without_a_topic_internal_topics_are_verified_too(broker: Any) -> None:
    """Kafka's ReplicaVerificationTool includes __consumer_offsets (and
    __transaction_state); verify-replicas without -t skipped them."""
    b = ["-b", broker.bootstrap]
    r = zygote.run(["produce", "-t", "plain", "-q", *b], input="a\nb\n", text=True,
                   timeout=60)
    assert r.returncode == 0, r.stderr
    r = zygote.run(["consume", "-t", "plain", "-G", "readers", "-e", *b], text=True,
                   timeout=60)  # the group's offsets: __consumer_offsets exists
    assert r.returncode == 0, r.stderr
    r = zygote.run(["cluster", "verify-replicas", "--json", *b], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    topics = {row["topic"] for row in json.loads(r.stdout)}
    assert {"plain", "__consumer_offsets"} <= topics
