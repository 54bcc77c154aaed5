"""`kafkactl rebalance -G G --trigger` shows the group once it has settled: kafkactl's
transient member joins (generation N) and leaves, which starts one more rebalance; the
members are shown when the group is Stable again without that member (each with its
subscription and assignment), not in the middle of that second rebalance (before: a
PreparingRebalance group with empty columns, 0.2 s after the trigger). Real `kafkactl
consume -G` members."""

from __future__ import annotations

import json
from typing import Any

from tests.groups.helpers import FAST, create_topic, kafkactl, wait_until
from tests.groups.rejoin_helpers import describe, holds, member, stop_members


def test_the_group_is_shown_stable_after_the_trigger(broker_factory: Any) -> None:
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "trs", 4)
    procs = [member(b.bootstrap, "gtrs", "trs", "a"), member(b.bootstrap, "gtrs", "trs", "b")]
    try:
        wait_until(lambda: holds(b.bootstrap, "gtrs", "a") and holds(b.bootstrap, "gtrs", "b"),
                   60, "both members holding partitions")
        _state, before = describe(b.bootstrap, "gtrs")

        r = kafkactl("rebalance", "-G", "gtrs", "--trigger", "--timeout", "60", "--json",
                     "-b", b.bootstrap, timeout=120)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert isinstance(doc["triggered_generation"], int), doc
        assert doc["state"] == "Stable", doc
        assert doc["protocol"], doc
        assert doc.get("settled") is True, doc
        assert "has not settled" not in r.stderr
        ms = doc["members"]
        assert sorted(m["client_id"] for m in ms) == ["a", "b"]  # kafkactl's member left
        assert {m["member_id"] for m in ms} == {mid for mid, _tps in before.values()}
        assert all(m["subscription"] == ["trs"] for m in ms), ms
        assert sorted(tp for m in ms for tp in m["current"]) == [f"trs-{p}" for p in range(4)]

        r = kafkactl("rebalance", "-G", "gtrs", "--trigger", "--timeout", "60",
                     "-b", b.bootstrap, timeout=120)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.strip().splitlines()
        assert lines[0].strip().startswith("group gtrs: Stable, protocol "), lines[0]
        assert "-" not in lines[0].rsplit(" ", 1)[1]  # a protocol is named
        assert "Rebalance triggered: the group reached generation" in lines[-1]
        assert "is Stable again" in lines[-1]
    finally:
        stop_members(*procs)
