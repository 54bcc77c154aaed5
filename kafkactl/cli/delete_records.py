"""`kafkactl delete-records`: kafka-delete-records.sh. Moves partitions' log start offsets
up (DeleteRecords, sent to each partition's leader by kafkactl.client.records_admin), from
Kafka's offset JSON file or from -t/-p/--before; prints each partition's new low
watermark, or its error, as Kafka's tool does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    client_security,
    command_config_option,
    fail,
    property_option,
)
from kafkactl.cli._output import write_line
from kafkactl.cli._topic_name import check_topic

if TYPE_CHECKING:  # the client is imported when the command runs, so --help stays fast
    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.client.records_admin import DeletedRecords

TopicPartition = tuple[str, int]
END_WORDS = ("end", "hw", "high-watermark")  # --before: the high watermark (-1)

# what a broker's error means for the partition, and what to do (the broker only names it;
# an error no broker answered, kafkactl.client.records_admin says in its own words)
EXPLAINED = {
    "OFFSET_OUT_OF_RANGE": "offset {offset} is above the partition's high watermark: give "
                           "an offset up to it, or -1 (--before end) for the high watermark",
    "TOPIC_AUTHORIZATION_FAILED": "not authorized: deleting records needs the Delete "
                                  "operation on topic {topic!r} (kafkactl acls add "
                                  "--allow-principal ... --operation Delete --topic "
                                  "{topic})",
    "NOT_LEADER_OR_FOLLOWER": "broker {broker} is not the partition's leader, and the "
                              "metadata named no other in time (a leader election in "
                              "progress?): try again",
    "POLICY_VIOLATION": "the topic's cleanup.policy is compact only: records of a "
                        "compacted topic cannot be deleted",
    "REQUEST_TIMED_OUT": "not every replica confirmed the new log start in time (the "
                         "leader may have deleted the records): try again or raise "
                         "--timeout",
}
EXIT_FAILED = 1


def _parse_before(text: str) -> int:
    if text.strip().lower() in END_WORDS:
        return -1
    try:
        value = int(text)
    except ValueError:
        value = -2
    if value < -1:
        raise fail(f"bad --before {text!r}: give an offset (>= 0), or end (or -1) for the "
                   "high watermark", 2)
    return value


def _parse_partitions(values: list[str]) -> list[int]:
    try:
        parts = sorted({int(p) for v in values for p in v.split(",") if p.strip()})
    except ValueError:
        parts = [-1]
    if not parts or parts[0] < 0:
        raise fail(f"bad --partition {','.join(values)!r}: expected partition numbers like "
                   "0,2", 2)
    return parts


def _from_file(path: Path) -> dict[TopicPartition, int]:
    from kafkactl.client.records_admin import OffsetFileError, parse_offset_json

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise fail(f"cannot read {str(path)!r}: {getattr(e, 'strerror', None) or e}") \
            from None
    try:
        return parse_offset_json(text)
    except OffsetFileError as e:
        raise fail(f"{path}: {e}") from None


def _wanted(client: KafkaClient, topic: str, partitions: list[int] | None,
            before: int) -> dict[TopicPartition, int]:
    from kafkactl.client.records_admin import topic_partitions

    parts = partitions if partitions is not None else topic_partitions(client, topic)
    return {(topic, p): before for p in parts}


def _message(tp: TopicPartition, offset: int, result: DeletedRecords) -> str:
    """The error of a partition in one clear sentence, after Kafka's name for it."""
    assert result.error is not None
    name = result.error.name
    explained = EXPLAINED.get(name) if result.broker >= 0 else None
    if explained is None:
        return f"{name}: {result.reason}"
    return f"{name}: " + explained.format(topic=tp[0], offset=offset, broker=result.broker)


def delete_records_command(
    offset_json_file: Path | None = typer.Option(
        None, "--offset-json-file", metavar="FILE", exists=True, dir_okay=False,
        help='The offset per partition, in Kafka\'s format: {"partitions": [{"topic": '
             '"t", "partition": 0, "offset": 10}], "version": 1}. Offset -1: the high '
             "watermark."),
    topic: str | None = typer.Option(None, "--topic", "-t",
                                     help="The topic (instead of --offset-json-file)."),
    partition: list[str] = typer.Option(
        [], "--partition", "-p", help="With --topic: only these partitions (repeatable, or "
                                      "0,2; default: every partition of the topic)."),
    before: str | None = typer.Option(
        None, "--before", metavar="OFFSET",
        help="With --topic: delete the records below this offset; end (or -1): below the "
             "high watermark, every record a consumer can read."),
    timeout_s: float = typer.Option(
        30.0, "--timeout", metavar="SECONDS", min=1.0,
        help="Give up on a partition not done after this long (leader elections are "
             "waited out meanwhile)."),
    as_json: bool = typer.Option(False, "--json", help="A JSON array, one object per "
                                                      "partition."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Delete the records of partitions below an offset (kafka-delete-records).

    Each partition's log start offset moves up to the offset given: the records below it
    are gone, and consumers that start from the earliest offset start there. The offsets
    come from --offset-json-file (Kafka's format; a partition named twice is refused) or
    from --topic with --before (every partition of the topic, or those of --partition).
    Prints each partition's new low watermark, as Kafka's tool does
    (`partition: t-0<TAB>low_watermark: 10`), or its error; exit status 1 when any
    partition failed (the others are done all the same)."""
    from kafkactl.client.errors import ClientError
    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.client.records_admin import delete_records
    from kafkactl.protocol.errors import KafkaError

    if (offset_json_file is None) == (topic is None):
        raise fail("give either --offset-json-file FILE or --topic TOPIC with --before", 2)
    if topic is None and (partition or before is not None):
        raise fail("--partition and --before go with --topic, not --offset-json-file", 2)
    if topic is not None:
        check_topic(topic, "--topic")  # a name Kafka does not allow: said before connecting
    if topic is not None and before is None:
        raise fail("--topic needs --before OFFSET (or --before end)", 2)
    parts = _parse_partitions(partition) if partition else None
    offset = _parse_before(before) if before is not None else -1
    wanted = _from_file(offset_json_file) if offset_json_file is not None else {}
    security = client_security(prop, command_config)
    try:
        client = KafkaClient(bootstrap, client_id="kafkactl-delete-records",
                             request_timeout_ms=int(timeout_s * 1000), security=security)
    except (ClientError, ValueError) as e:
        raise fail(str(e)) from None
    try:
        if topic is not None:
            wanted = _wanted(client, topic, parts, offset)
        results = delete_records(client, wanted, timeout_s=timeout_s) if wanted else {}
    except (ClientError, KafkaError) as e:
        raise fail(str(e)) from None
    finally:
        client.close()
    failed = _print(results, wanted, as_json)
    if failed:
        typer.echo(f"error: the records of {failed} of {len(results)} partition(s) were not "
                   "deleted", err=True)
        raise typer.Exit(EXIT_FAILED)


def _print(results: dict[TopicPartition, DeletedRecords], wanted: dict[TopicPartition, int],
           as_json: bool) -> int:
    """Print the results; how many partitions failed."""
    failed = sum(1 for r in results.values() if r.error is not None)
    if as_json:
        write_line(json.dumps([{
            "topic": t, "partition": p, "offset": wanted[(t, p)],
            "low_watermark": None if r.error is not None else r.low_watermark,
            "error": None if r.error is None else r.error.name,
            "message": None if r.error is None else _message((t, p), wanted[(t, p)], r)}
            for (t, p), r in results.items()], indent=1))
        return failed
    # Kafka's tool prints the first line before it sends: here nothing is printed when no
    # broker answers at all, and the error says why
    write_line("Executing records delete operation")
    write_line("Records delete operation completed:")
    for (t, p), r in results.items():
        if r.error is None:
            write_line(f"partition: {t}-{p}\tlow_watermark: {r.low_watermark}")
        else:
            write_line(f"partition: {t}-{p}\terror: {_message((t, p), wanted[(t, p)], r)}")
    return failed


def register(app: typer.Typer) -> None:
    app.command(name="delete-records")(delete_records_command)
