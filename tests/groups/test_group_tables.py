"""The group tables as Kafka's tools print them: `kafkactl offsets show -G` lists a member
that has no partition too (as kafka-consumer-groups --describe: a row with `-` for topic,
partition, offsets and lag; it showed only the members that own partitions), and
`kafkactl rebalance -G` names each member's group.instance.id (only --json did)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests import zygote
from tests.conftest import BrokerProcess
from tests.polling import wait_until

pytest.importorskip("confluent_kafka")


def test_members_without_partitions_have_rows(module_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer

    topic, group = f"idle-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": module_broker.bootstrap})
    p.produce(topic, b"v")
    assert p.flush(30) == 0
    members = [Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": group,
                         "client.id": f"member-{i}", "auto.offset.reset": "earliest"})
               for i in range(3)]
    try:
        for c in members:
            c.subscribe([topic])

        def rows() -> list[dict[str, Any]] | None:
            for c in members:
                c.poll(0.1)
            r = zygote.run(["offsets", "show", "-b", module_broker.bootstrap, "-G", group,
                            "--json"], text=True, timeout=60)
            if r.returncode != 0:
                return None
            got = json.loads(r.stdout)
            settled = len(got) == 3 and all(x["consumer_id"] for x in got) and any(
                x["topic"] is not None for x in got)  # (assigned: the group is stable)
            return got if settled else None

        got = wait_until(rows, 60, "three members in the group's rows")
        owned = [x for x in got if x["topic"] is not None]
        idle = [x for x in got if x["topic"] is None]
        assert len(owned) == 1 and owned[0]["partition"] == 0, got
        assert len(idle) == 2 and all(x["partition"] is None and x["lag"] is None
                                      for x in idle), got
        assert sorted(x["client_id"] for x in got) == ["member-0", "member-1", "member-2"]
        r = zygote.run(["offsets", "show", "-b", module_broker.bootstrap, "-G", group],
                       text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        lines = [line.split() for line in r.stdout.splitlines()[1:] if line.strip()]
        assert sum(1 for cols in lines if cols[1:6] == ["-"] * 5) == 2, r.stdout
    finally:
        for c in members:
            c.close()


def test_the_rebalance_table_names_static_members(module_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer

    topic, group = f"static-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    zygote.run(["topics", "create", "-b", module_broker.bootstrap, "-t", topic],
               text=True, timeout=60)
    c = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": group,
                  "group.instance.id": "node-7", "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])

        def table() -> str | None:
            c.poll(0.1)
            r = zygote.run(["rebalance", "-b", module_broker.bootstrap, "-G", group],
                           text=True, timeout=60)
            return r.stdout if r.returncode == 0 and f"{topic}-0" in r.stdout else None

        out = wait_until(table, 60, "the member's assignment in the table")
        assert "GROUP-INSTANCE-ID" in out and "node-7" in out, out
    finally:
        c.close()
