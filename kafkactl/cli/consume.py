"""`kafkactl consume`: records of one or more topics to stdout."""

from __future__ import annotations

import base64
import json
import re
import select
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    client_security,
    command_config_option,
    fail,
    property_option,
    unescape,
)
from kafkactl.cli._output import StdoutClosed
from kafkactl.cli._record_writer import RecordWriter, install_signal_handlers

if TYPE_CHECKING:  # the client is imported when a command runs, so --help stays fast
    from kafkactl.client.consumer import Consumer
    from kafkactl.client.fetcher import ConsumerRecord
    from kafkactl.client.record_format import BatchFormat
    from kafkactl.client.topic_reader import StartOffset

TOKEN = re.compile(rb"%[tpokKsSTh%]")


def parse_offset(spec: str) -> StartOffset:
    """--offset -> StartOffset(earliest|latest|absolute|relative|timestamp, value)."""
    from kafkactl.client.fetcher import EARLIEST, LATEST
    from kafkactl.client.topic_reader import StartOffset

    s = spec.strip()
    low = s.lower()
    if low in ("earliest", "beginning", "start"):
        return StartOffset("earliest", EARLIEST)
    if low in ("latest", "end"):
        return StartOffset("latest", LATEST)
    if re.fullmatch(r"\d+", s):
        return StartOffset("absolute", int(s))
    if re.fullmatch(r"-\d+", s):
        return StartOffset("relative", int(s))
    if s.startswith("@") and re.fullmatch(r"@\d+", s):
        return StartOffset("timestamp", int(s[1:]))
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(
            f"--offset {spec!r}: use earliest, latest, N, -N (from the end), @<ms timestamp> "
            "or an ISO date such as 2024-05-01T12:00:00") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local time, like the shell tools
    return StartOffset("timestamp", int(dt.astimezone(UTC).timestamp() * 1000))


def _b(v: memoryview | None, null: bytes = b"") -> bytes:
    return null if v is None else bytes(v)


def compile_format(fmt: str) -> Any:
    """kcat -f tokens: %t %p %o %k %s %K %S %T %h, plus %% and \\n \\t \\xNN escapes."""
    raw = unescape(fmt)
    pieces = TOKEN.split(raw)
    tokens = TOKEN.findall(raw)

    def render(r: ConsumerRecord) -> bytes:
        out = [pieces[0]]
        for tok, lit in zip(tokens, pieces[1:], strict=True):
            c = tok[1:2]
            if c == b"s":
                out.append(_b(r.value))
            elif c == b"k":
                out.append(_b(r.key))
            elif c == b"t":
                out.append(r.topic.encode())
            elif c == b"p":
                out.append(b"%d" % r.partition)
            elif c == b"o":
                out.append(b"%d" % r.offset)
            elif c == b"T":
                out.append(b"%d" % r.timestamp)
            elif c == b"S":
                out.append(b"%d" % (-1 if r.value is None else len(r.value)))
            elif c == b"K":
                out.append(b"%d" % (-1 if r.key is None else len(r.key)))
            elif c == b"h":
                out.append(b",".join(k.encode() + b"=" + _b(v, b"NULL") for k, v in r.headers))
            else:
                out.append(b"%")
            out.append(lit)
        return b"".join(out)

    return render


def compile_batch_format(fmt: str) -> BatchFormat | None:
    """The whole-batch form of a -f format (None: render it record by record)."""
    from kafkactl.client.record_format import BatchFormat

    raw = unescape(fmt)
    return BatchFormat.compile(TOKEN.split(raw), [t[1:2] for t in TOKEN.findall(raw)])


def _text(v: memoryview | None) -> tuple[Any, bool]:
    if v is None:
        return None, False
    b = bytes(v)
    try:
        return b.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(b).decode("ascii"), True


def render_json(r: ConsumerRecord) -> bytes:
    key, kb64 = _text(r.key)
    payload, vb64 = _text(r.value)
    d: dict[str, Any] = {
        "topic": r.topic, "partition": r.partition, "offset": r.offset,
        "tstype": "logappend" if r.timestamp_type == 1 else "create", "ts": r.timestamp,
    }
    if r.headers:
        d["headers"] = [[k, _text(v)[0]] for k, v in r.headers]
    d["key"] = key
    d["payload"] = payload
    if kb64:
        d["key_encoding"] = "base64"
    if vb64:
        d["payload_encoding"] = "base64"
    return json.dumps(d, ensure_ascii=False).encode() + b"\n"


def _group_source(group: str) -> Any:
    """Consumer groups: `--group G` consumes through kafkactl.client.group.GroupConsumer."""
    from kafkactl.client.group import GroupConsumer

    return GroupConsumer


# C901: a command: option checks, then the read loop and its exits, in order
def consume(  # noqa: C901
    topic: list[str] = typer.Option([], "--topic", "-t", help="Topic (repeatable)."),
    topic_pattern: str | None = typer.Option(
        None, "--topic-pattern",
        help="Whitelist: topics whose whole name matches this regex (e.g. 'orders.*')."),
    exclude_pattern: str | None = typer.Option(None, "--exclude-pattern",
                                               help="Blacklist: skip topics whose whole name "
                                                    "matches this."),
    partition: list[int] = typer.Option([], "--partition", "-p",
                                        help="Only this partition (repeatable)."),
    offset: str | None = typer.Option(
        None, "--offset", "-o",
        help="earliest | latest | N | -N (N before the end) | @<ms timestamp> | ISO date."),
    from_beginning: bool = typer.Option(False, "--from-beginning",
                                        help="Start at the earliest offset."),
    max_messages: int | None = typer.Option(None, "--max-messages", "-c",
                                            help="Exit after this many records."),
    exit_at_end: bool = typer.Option(False, "--exit-at-end", "-e",
                                     help="Exit when every partition is read to its end."),
    fmt: str | None = typer.Option(None, "--format", "-f",
                                   help="kcat tokens %t %p %o %k %s %T %h %K %S; \\n \\t."),
    as_json: bool = typer.Option(False, "--json", "-J", help="One JSON object per record."),
    key_separator: str | None = typer.Option(None, "--key-separator", "-K",
                                             help="Print key SEP value."),
    print_offsets: bool = typer.Option(False, "--print-offsets",
                                       help="Prefix each record with its offset."),
    group: str | None = typer.Option(
        None, "--group", "-G", "-g",
        help="Consume as a member of this consumer group: the group assigns the "
             "partitions and the consumed offsets are committed."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
    zookeeper: str | None = typer.Option(
        None, "--zookeeper", metavar="HOST:PORT[/CHROOT]",
        help="With --group: a ZooKeeper-coordinated group (the seed's consumer: members, "
             "partition owners and offsets under /consumers/GROUP); brokers are found in "
             "/brokers/ids unless -b is given."),
    offsets_storage: str = typer.Option(
        "zookeeper", "--offsets-storage",
        help="With --zookeeper: where offsets are kept, zookeeper or kafka (the broker)."),
    dual_commit: bool = typer.Option(
        False, "--dual-commit",
        help="With --offsets-storage kafka: commit to ZooKeeper too (the migration step)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary on stderr."),
) -> None:
    """Print records of the given topics to stdout (value per line by default)."""
    from kafkactl.client.consumer import Consumer
    from kafkactl.client.errors import ClientError
    from kafkactl.client.fetcher import EARLIEST, LATEST
    from kafkactl.client.topic_reader import StartOffset, TopicReader
    from kafkactl.cluster.zookeeper import ZooKeeperUnavailable
    from kafkactl.protocol.errors import KafkaError
    from kafkactl.record.errors import RecordError

    if not topic and not topic_pattern:
        raise fail("give -t/--topic (repeatable) or --topic-pattern", 2)
    if zookeeper and not group:
        raise fail("--zookeeper needs -G/--group (a ZooKeeper consumer group)", 2)
    if offsets_storage not in ("zookeeper", "kafka"):
        raise fail("--offsets-storage must be zookeeper or kafka", 2)
    if dual_commit and offsets_storage != "kafka":
        raise fail("--dual-commit goes with --offsets-storage kafka", 2)
    if zookeeper and topic and topic_pattern:
        raise fail("a ZooKeeper consumer takes -t/--topic or --topic-pattern, not both", 2)
    if offset is not None and from_beginning:
        raise fail("--offset and --from-beginning are mutually exclusive", 2)
    try:
        start = StartOffset("earliest", EARLIEST) if from_beginning else (
            parse_offset(offset) if offset is not None else StartOffset("latest", LATEST))
        for rx in (topic_pattern, exclude_pattern):
            if rx:
                re.compile(rx)
        sep = unescape(key_separator) if key_separator is not None else None
        batch_format = None
        if fmt is not None:
            render = compile_format(fmt)
            batch_format = compile_batch_format(fmt)
        elif as_json:
            render = render_json
        else:
            parts = []
            if print_offsets:
                parts.append("%o" + (key_separator if key_separator is not None else "\\t"))
            if sep is not None:
                parts.append("%k" + key_separator)  # type: ignore[operator]
            parts.append("%s\\n")
            render = compile_format("".join(parts))
    except (typer.BadParameter, re.error) as e:
        raise fail(str(e), 2) from None
    # value (or key SEP value) per line: the reader renders those itself, and header-less
    # batches skip the per-record render
    plain = fmt is None and not as_json and not print_offsets and (sep is None or b"%" not in sep)
    source = _group_source(group) if group else None
    security = client_security(prop, command_config)

    install_signal_handlers()  # SIGTERM like Ctrl-C: commit, leave the group, exit
    out = RecordWriter()
    t0 = time.monotonic()
    consumer: Consumer | None = None
    closed = False
    try:
        reset = "earliest" if start.kind == "earliest" else "latest"
        if zookeeper:  # the seed's ZooKeeper-coordinated group
            from kafkactl.client.zookeeper_consumer import ZookeeperConsumer

            consumer = ZookeeperConsumer(
                *topic, group_id=group or "", zookeeper=zookeeper,
                pattern=topic_pattern or exclude_pattern, blacklist=bool(exclude_pattern
                                                                      and not topic_pattern),
                bootstrap_servers=bootstrap, auto_offset_reset=reset,
                offsets_storage=offsets_storage, dual_commit=dual_commit, security=security)
        elif source is not None:  # --group: the group assigns partitions, offsets committed
            consumer = source(*topic, group_id=group, bootstrap_servers=bootstrap,
                              pattern=topic_pattern, auto_offset_reset=reset,
                              security=security)
        else:
            consumer = Consumer(*topic, bootstrap_servers=bootstrap, pattern=topic_pattern,
                                exclude=exclude_pattern, partitions=partition or None,
                                auto_offset_reset=reset, security=security)
        out.consumed = consumer.consumed  # what the writer wrote is what a group commits
        reader = TopicReader(consumer, max_records=max_messages, until_end=exit_at_end,
                             stop_when_idle=_stdout_closed)
        if not reader.partitions and source is None and not zookeeper:
            raise fail(_no_partitions_message(topic, topic_pattern, exclude_pattern), 1)
        if source is None and not zookeeper:
            reader.seek(start)
        lines = reader.lines(key_separator=sep) if plain else reader.lines(
            render, batch_format=batch_format)
        stop = consumer.rebalance_pending
        for pieces in lines:
            unwritten = out.write(pieces, stop)
            if unwritten:  # a slow reader, and the group rebalances: rejoin, then go on
                reader.give_back(pieces, unwritten)
    except KeyboardInterrupt:
        pass
    except StdoutClosed:
        closed = True  # the reader went away: the EPIPE rule, after the summary
    except (ClientError, KafkaError, RecordError, ValueError, ZooKeeperUnavailable) as e:
        raise fail(str(e)) from None
    finally:
        if consumer is not None:
            consumer.close()
    if not quiet:
        dt = max(time.monotonic() - t0, 1e-6)
        typer.echo(f"Processed a total of {out.records:,} messages in {dt:.2f} s", err=True)
    if closed:
        raise StdoutClosed


def _no_partitions_message(topics: list[str], pattern: str | None,
                           exclude: str | None) -> str:
    if pattern is None:
        return "no partitions match the given topics"
    msg = (f"no topic matches --topic-pattern {pattern!r}" +
           (f" (minus --exclude-pattern {exclude!r})" if exclude else "") +
           ": the pattern must match the whole topic name, as in Kafka's tools (Java's "
           "Pattern.matches)")
    if not pattern.endswith((".*", ".+")):
        msg += f"; for names that start with it, try {pattern + '.*'!r}"
    return msg


def _stdout_closed() -> bool:
    """True when stdout is a pipe whose reader went away (checked while idle, so that
    `consume | head` ends even when no more records arrive)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def register(app: typer.Typer) -> None:
    app.command("consume")(consume)
