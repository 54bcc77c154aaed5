"""`kafkactl transactions describe-producers` and `find-hanging` print kafka-transactions'
tables: its headers and columns, in its order (Kafka's TransactionsCommand); --json keeps
every field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kafkactl.cli import transactions
from kafkactl.client.transaction_admin import ProducerState

LAST_MS = 1_795_000_000_000  # the producers' last writes, fixed
OPEN = ProducerState(topic="orders", partition=3, producer_id=4001, producer_epoch=2,
                     last_sequence=41, last_timestamp=LAST_MS, coordinator_epoch=7,
                     current_txn_start_offset=1200)
IDLE = ProducerState(topic="orders", partition=3, producer_id=4002, producer_epoch=0,
                     last_sequence=9, last_timestamp=LAST_MS + 5000, coordinator_epoch=-1,
                     current_txn_start_offset=-1)


class FakeAdmin:
    """What the commands ask of TransactionAdmin, answered without a broker."""

    def __init__(self) -> None:
        self.client = self

    def close(self) -> None:
        pass

    def producers(self, partitions: list[tuple[str, int]], broker_id: int | None = None
                  ) -> list[ProducerState]:
        assert partitions == [("orders", 3)] and broker_id is None
        return [OPEN, IDLE]

    def partitions_of(self, topic: str | None, partition: int | None,
                      broker_id: int | None) -> list[tuple[str, int]]:
        return [("orders", 3)]

    def find_hanging(self, parts: list[tuple[str, int]], max_ms: int) -> list[ProducerState]:
        return [OPEN]


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> Any:
    def fake(bootstrap: str | None, prop: list[str], command_config: Path | None) -> Any:
        return FakeAdmin()

    monkeypatch.setattr(transactions, "_admin", fake)
    # the clock: 125.5 minutes after OPEN's last write (Duration(min) is whole minutes)
    monkeypatch.setattr(transactions.time, "time", lambda: (LAST_MS + 125 * 60000 + 30000)
                        / 1000)

    def invoke(*args: str) -> str:
        r = CliRunner().invoke(transactions.transactions_app, [*args, "-b", "h:1"])
        assert r.exit_code == 0, r.output
        return r.output

    return invoke


def cells(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.strip()]


def test_describe_producers_table_is_kafkas(run: Any) -> None:
    lines = cells(run("describe-producers", "--topic", "orders", "--partition", "3"))
    assert lines[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
                        "LastSequence", "LastTimestamp", "CurrentTransactionStartOffset"]
    assert lines[1:] == [
        ["4001", "2", "7", "41", str(OPEN.last_timestamp), "1200"],
        ["4002", "0", "-1", "9", str(IDLE.last_timestamp), "None"]]


def test_find_hanging_table_is_kafkas(run: Any) -> None:
    lines = cells(run("find-hanging", "--topic", "orders", "--max-transaction-timeout",
                      "0"))
    assert lines[0] == ["Topic", "Partition", "ProducerId", "ProducerEpoch",
                        "CoordinatorEpoch", "StartOffset", "LastTimestamp", "Duration(min)"]
    assert lines[1:] == [
        ["orders", "3", "4001", "2", "7", "1200", str(OPEN.last_timestamp), "125"]]


def test_json_keeps_every_field(run: Any) -> None:
    (doc,) = json.loads(run("find-hanging", "--topic", "orders", "--json"))
    assert doc["last_sequence"] == 41 and doc["current_txn_start_offset"] == 1200
    assert doc["duration_ms"] == 125 * 60000 + 30000
    docs = json.loads(run("describe-producers", "--topic", "orders", "--partition", "3",
                          "--json"))
    assert [(d["topic"], d["partition"], d["coordinator_epoch"]) for d in docs] == [
        ("orders", 3, 7), ("orders", 3, -1)]
