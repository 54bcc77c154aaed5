"""`kafkactl transactions list | describe | describe-producers | find-hanging | abort`: Kafka's
kafka-transactions tool (KIP-664) over ListTransactions, DescribeTransactions,
DescribeProducers and WriteTxnMarkers (kafkactl.client.transaction_admin).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    client_security,
    command_config_option,
    fail,
    property_option,
)
from kafkactl.cli._output import print_table, write_line

transactions_app = typer.Typer(
    help="List, describe, find hanging and abort transactions (kafka-transactions).",
    no_args_is_help=True)


def _admin(bootstrap: str | None, prop: list[str], command_config: Path | None) -> Any:
    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.client.transaction_admin import TransactionAdmin

    return TransactionAdmin(KafkaClient(bootstrap, client_id="kafkactl-admin",
                                        security=client_security(prop, command_config)))


def _run(admin: Any, fn: Any) -> Any:
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    try:
        return fn()
    except (ClientError, KafkaError, OSError) as e:
        raise fail(str(e)) from None
    finally:
        admin.client.close()


def _table(*headers: str) -> Any:
    from rich.table import Table

    return Table(*headers, box=None)


def _json_option() -> Any:
    return typer.Option(False, "--json", help="JSON output.")


@transactions_app.command("list")
def list_transactions(
    state: list[str] = typer.Option(
        [], "--state", help="Only transactions in this state (repeatable, any case): Empty, "
        "Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, "
        "PrepareEpochFence."),
    producer_id: list[int] = typer.Option(
        [], "--producer-id", help="Only the transactions of this producer id (repeatable)."),
    duration_ms: int = typer.Option(
        -1, "--duration-filter", help="Only transactions running longer than this many ms."),
    as_json: bool = _json_option(),
    bootstrap: str | None = bootstrap_option(), prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """The transactional ids every coordinator knows, with producer id and state."""
    from kafkactl.client.transaction_admin import TRANSACTION_STATES, transaction_state

    states = []
    for name in state:
        known = transaction_state(name)
        if known is None:
            raise fail(f"unknown transaction state {name!r} for --state: one of "
                       f"{', '.join(TRANSACTION_STATES)}", 2)
        states.append(known)
    admin = _admin(bootstrap, prop, command_config)
    rows, unknown = _run(admin, lambda: admin.list_transactions_and_unknown_states(
        states, producer_id, duration_ms))
    if unknown:  # a broker that does not know a state kafkactl does: say so, list nothing
        raise fail("the brokers did not know these --state filters: " + "; ".join(
            f"broker {node}: {', '.join(names)}" for node, names in sorted(unknown.items())))
    if as_json:
        write_line(json.dumps([{"transactional_id": t.transactional_id,
                                "coordinator": t.coordinator, "producer_id": t.producer_id,
                                "state": t.state} for t in rows]))
        return
    table = _table("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
    for t in rows:
        table.add_row(t.transactional_id, str(t.coordinator), str(t.producer_id), t.state)
    print_table(table)


@transactions_app.command("describe")
def describe(
    transactional_id: str = typer.Option(..., "--transactional-id", "-t",
                                         help="The transactional id."),
    as_json: bool = _json_option(),
    bootstrap: str | None = bootstrap_option(), prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """A transactional id's state, producer, timeout and partitions (from its coordinator)."""
    admin = _admin(bootstrap, prop, command_config)
    d = _run(admin, lambda: admin.describe(transactional_id))
    now = int(time.time() * 1000)
    duration = now - d.start_time_ms if d.start_time_ms >= 0 else -1
    if as_json:
        write_line(json.dumps({**d.as_json(), "duration_ms": duration}))
        return
    table = _table("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                   "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                   "TransactionDurationMs", "TopicPartitions")
    table.add_row(str(d.coordinator), d.transactional_id, str(d.producer_id),
                  str(d.producer_epoch), d.state, str(d.timeout_ms),
                  "None" if d.start_time_ms < 0 else str(d.start_time_ms),
                  "None" if duration < 0 else str(duration),
                  ",".join(f"{t}-{p}" for t, p in d.partitions))
    print_table(table)


# kafka-transactions' tables (TransactionsCommand's DescribeProducersCommand and
# FindHangingTransactionsCommand): their headers and columns, in their order.
PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                     "LastTimestamp", "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                   "StartOffset", "LastTimestamp", "Duration(min)")


def _minutes(ms: int) -> int:
    """Whole minutes of `ms`, truncated toward zero (Java's TimeUnit.toMinutes)."""
    return ms // 60000 if ms >= 0 else -(-ms // 60000)


def _producer_rows(states: list[Any], as_json: bool, with_duration: bool = False) -> None:
    """describe-producers' table (with_duration False) or find-hanging's (True); --json
    gives every field of each producer state either way."""
    now = int(time.time() * 1000)
    if as_json:
        write_line(json.dumps([{
            "topic": s.topic, "partition": s.partition, "producer_id": s.producer_id,
            "producer_epoch": s.producer_epoch, "last_sequence": s.last_sequence,
            "last_timestamp": s.last_timestamp, "coordinator_epoch": s.coordinator_epoch,
            "current_txn_start_offset": s.current_txn_start_offset,
            **({"duration_ms": now - s.last_timestamp} if with_duration else {})}
            for s in states]))
        return
    table = _table(*(HANGING_HEADERS if with_duration else PRODUCERS_HEADERS))
    for s in states:
        if with_duration:
            table.add_row(s.topic, str(s.partition), str(s.producer_id),
                          str(s.producer_epoch), str(s.coordinator_epoch),
                          str(s.current_txn_start_offset), str(s.last_timestamp),
                          str(_minutes(now - s.last_timestamp)))
        else:
            table.add_row(str(s.producer_id), str(s.producer_epoch), str(s.coordinator_epoch),
                          str(s.last_sequence), str(s.last_timestamp),
                          "None" if s.current_txn_start_offset < 0
                          else str(s.current_txn_start_offset))
    print_table(table)


@transactions_app.command("describe-producers")
def describe_producers(
    topic: str = typer.Option(..., "--topic", help="The topic."),
    partition: int = typer.Option(..., "--partition", help="The partition."),
    broker_id: int | None = typer.Option(
        None, "--broker-id", help="Ask this broker, which must host a replica of the "
        "partition (a follower answers from its own log); by default the leader."),
    as_json: bool = _json_option(),
    bootstrap: str | None = bootstrap_option(), prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """A partition's active producers and their open transactions (from its leader, or
    the replica on --broker-id)."""
    admin = _admin(bootstrap, prop, command_config)
    _producer_rows(_run(admin, lambda: admin.producers([(topic, partition)], broker_id)),
                   as_json)


@transactions_app.command("find-hanging")
def find_hanging(
    broker_id: int | None = typer.Option(
        None, "--broker-id", help="Look at the partitions this broker hosts (of --topic, if "
        "given), as this broker's replicas see them, leader or follower."),
    topic: str | None = typer.Option(None, "--topic", help="Look at this topic."),
    partition: int | None = typer.Option(
        None, "--partition", help="Only this partition of --topic."),
    max_timeout_min: int = typer.Option(
        15, "--max-transaction-timeout",
        help="The brokers' transaction.max.timeout.ms, in minutes: an open transaction "
             "older than that is a candidate."),
    as_json: bool = _json_option(),
    bootstrap: str | None = bootstrap_option(), prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Open transactions their coordinator does not list on that partition, ongoing or
    still to be marked (they hold the last stable offset back: read_committed consumers
    stall)."""
    if broker_id is None and topic is None:
        raise fail("give --broker-id or --topic (with an optional --partition), or both", 2)
    if partition is not None and topic is None:
        raise fail("--partition needs --topic", 2)
    if max_timeout_min < 0:
        raise fail("--max-transaction-timeout must be at least 0", 2)
    admin = _admin(bootstrap, prop, command_config)

    def work() -> list[Any]:
        parts = admin.partitions_of(topic, partition, broker_id)
        if not parts:
            return []
        if broker_id is None:
            return admin.find_hanging(parts, max_timeout_min * 60000)
        return admin.find_hanging(parts, max_timeout_min * 60000, broker_id=broker_id)

    _producer_rows(_run(admin, work), as_json, with_duration=True)


@transactions_app.command("abort")
def abort(
    topic: str = typer.Option(..., "--topic", help="The topic."),
    partition: int = typer.Option(..., "--partition", help="The partition."),
    start_offset: int | None = typer.Option(
        None, "--start-offset", help="The offset the open transaction starts at "
        "(find-hanging's StartOffset)."),
    producer_id: int | None = typer.Option(None, "--producer-id", help="The producer id."),
    producer_epoch: int | None = typer.Option(None, "--producer-epoch",
                                              help="The producer epoch."),
    coordinator_epoch: int | None = typer.Option(
        None, "--coordinator-epoch", help="The coordinator epoch (find-hanging's "
        "CoordinatorEpoch; a negative one, a producer no coordinator has marked yet, is "
        "taken as 0)."),
    as_json: bool = _json_option(),
    bootstrap: str | None = bootstrap_option(), prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Abort a hanging transaction on one partition (an ABORT marker written by its leader;
    needs ClusterAction with an authorizer)."""
    explicit = (producer_id, producer_epoch, coordinator_epoch)
    if start_offset is None:
        # kafka-transactions' checks, in its order (it exits 1; kafkactl's usage errors 2)
        if producer_id is None:
            raise fail("the transaction to abort must be identified either with "
                       "--start-offset or with --producer-id, --producer-epoch and "
                       "--coordinator-epoch", 2)
        if producer_epoch is None:
            raise fail("Missing required argument --producer-epoch", 2)
        if coordinator_epoch is None:
            raise fail("Missing required argument --coordinator-epoch", 2)
    elif any(v is not None for v in explicit):
        raise fail("give --start-offset or the producer's ids, not both", 2)
    admin = _admin(bootstrap, prop, command_config)
    if start_offset is not None:
        s = _run(admin, lambda: admin.abort_at(topic, partition, start_offset))
        # (abort_at writes the marker with the coordinator epoch the leader knows, 0 if none)
        aborted = {"producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
                   "coordinator_epoch": max(s.coordinator_epoch, 0)}
    else:
        assert producer_id is not None and producer_epoch is not None
        assert coordinator_epoch is not None
        # -1 is what DescribeProducers gives for a producer whose transaction became
        # hanging before any marker: Kafka's tool then uses 0, which no leader refuses
        epoch = max(coordinator_epoch, 0)
        _run(admin, lambda: admin.abort(topic, partition, producer_id, producer_epoch, epoch))
        aborted = {"producer_id": producer_id, "producer_epoch": producer_epoch,
                   "coordinator_epoch": epoch}
    if as_json:
        write_line(json.dumps({"topic": topic, "partition": partition, **aborted,
                               "start_offset": start_offset}))
        return
    write_line(f"Aborted the transaction of producer {aborted['producer_id']} (epoch "
               f"{aborted['producer_epoch']}) on {topic}-{partition}"
               + (f" starting at offset {start_offset}." if start_offset is not None else "."))


def register(app: typer.Typer) -> None:
    app.add_typer(transactions_app, name="transactions")
