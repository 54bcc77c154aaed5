"""`kafkactl consume`: records of one or more topics to stdout."""

from __future__ import annotations

import base64
import json
import os
import re
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    check_text,
    command_config_option,
    fail,
    flag_or_property,
    iso_datetime_ms,
    property_option,
    unescape,
)
from kafkactl.cli._output import StdoutClosed, StdoutFailed
from kafkactl.cli._record_writer import RecordWriter, install_signal_handlers, shutting_down
from kafkactl.cli._topic_name import check_topic

if TYPE_CHECKING:  # the client is imported when a command runs, so --help stays fast
    from kafkactl.client.consumer import Consumer
    from kafkactl.client.fetcher import ConsumerRecord
    from kafkactl.client.group import GroupConsumer
    from kafkactl.client.record_format import BatchFormat, KernelFormat
    from kafkactl.client.topic_reader import StartOffset

TOKEN = re.compile(rb"%[tpokKsSThR%]")
ANY_TOKEN = re.compile(rb"%(.?)", re.DOTALL)
TOKENS_HELP = "%t %p %o %k %K %s %S %R %T %h %%"


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
        return StartOffset("timestamp", iso_datetime_ms(s))  # (UTC without a zone)
    except ValueError:
        raise typer.BadParameter(
            f"--offset {spec!r}: use earliest, latest, N, -N (from the end), @<ms timestamp> "
            "or an ISO date such as 2024-05-01T12:00:00") from None


# A group member's max.poll.records unless -X gives one (Java's default)
GROUP_MAX_POLL_RECORDS = 500
# Kafka's console consumer's name for --null-literal (--property null.literal=STR)
NULL_LITERAL_PROPERTY = "null.literal"


def _null_literal(flag: str | None, prop: list[str]) -> tuple[str | None, list[str]]:
    """--null-literal, or -X null.literal (Kafka's console consumer's --property; the last
    one given wins), and the other -X items; the two must agree (exit 2)."""
    return flag_or_property(flag, prop, NULL_LITERAL_PROPERTY, "--null-literal")


def _null_text(print_null: bool, null_literal: str | None, as_json: bool) -> bytes:
    """What %k / %s print for a null key / value: nothing, NULL (-Z) or --null-literal's
    STR, taken literally as Kafka takes it (BadParameter with -J, whose nulls are JSON's:
    -Z there changes nothing, as in kcat)."""
    if null_literal is not None and as_json:
        raise typer.BadParameter("-J prints a null key or value as JSON null: "
                                 "--null-literal is for the text formats")
    if as_json:
        return b""
    if null_literal is not None:
        return os.fsencode(null_literal)
    return b"NULL" if print_null else b""


def _b(v: memoryview | None, null: bytes = b"") -> bytes:
    return null if v is None else bytes(v)


def _check_tokens(fmt: str, raw: bytes) -> None:
    """Refuse a token kcat does not have (kcat: "Unsupported formatter")."""
    for m in ANY_TOKEN.finditer(raw):
        if not TOKEN.fullmatch(m.group(0)):
            shown = "%" + m.group(1).decode("utf-8", "replace")
            raise typer.BadParameter(
                (f"--format '{fmt}': unsupported token '{shown}'" if m.group(1) else
                 f"--format '{fmt}' ends with a lone '%' (write %% for a percent sign)")
                + f"; the tokens are kcat's: {TOKENS_HELP}")


def compile_format(fmt: str, null: bytes = b"") -> Any:
    """kcat -f tokens: %t %p %o %k %s %K %S %R %T %h, plus %% and \\n \\t \\xNN escapes;
    %k / %s of a null key / value is `null` (kcat -Z: NULL)."""
    raw = unescape(fmt)
    _check_tokens(fmt, raw)
    pieces = TOKEN.split(raw)
    tokens = TOKEN.findall(raw)

    def render(r: ConsumerRecord) -> bytes:
        out = [pieces[0]]
        for tok, lit in zip(tokens, pieces[1:], strict=True):
            c = tok[1:2]
            if c == b"s":
                out.append(_b(r.value, null))
            elif c == b"k":
                out.append(_b(r.key, null))
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
            elif c == b"R":  # kcat: the value's length as a big-endian 32-bit integer
                out.append((-1 if r.value is None else len(r.value)).to_bytes(
                    4, "big", signed=True))
            elif c == b"K":
                out.append(b"%d" % (-1 if r.key is None else len(r.key)))
            elif c == b"h":
                # a key's own bytes, as kcat prints it (not UTF-8 ones too: record.batch)
                out.append(b",".join(k.encode("utf-8", "surrogateescape") + b"=" + _b(v, b"NULL")
                                     for k, v in r.headers))
            else:
                out.append(b"%")
            out.append(lit)
        return b"".join(out)

    return render


def compile_batch_format(fmt: str, null: bytes = b"") -> BatchFormat | None:
    """The whole-batch form of a -f format (None: render it record by record)."""
    from kafkactl.client.record_format import BatchFormat

    raw = unescape(fmt)
    return BatchFormat.compile(TOKEN.split(raw), [t[1:2] for t in TOKEN.findall(raw)], null)


def compile_kernel_format(fmt: str, null: bytes = b"") -> KernelFormat | None:
    """The compiled kernels' form of a -f format (None without them)."""
    from kafkactl.client.record_format import KernelFormat

    raw = unescape(fmt)
    return KernelFormat.compile(TOKEN.split(raw), [t[1:2] for t in TOKEN.findall(raw)],
                                null)


def _text(v: bytes | memoryview | None) -> tuple[Any, bool]:
    if v is None:
        return None, False
    b = bytes(v)
    try:
        return b.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(b).decode("ascii"), True


def json_renderer(broker_of: Callable[[str, int], int]) -> Callable[[ConsumerRecord], bytes]:
    """kcat -J's object per record: topic, partition, offset, tstype, ts, broker (the
    leader it was read from, `broker_of(topic, partition)`), headers (kcat's flat
    [name, value, ...] list, only when there are headers), key, payload. Keys, values,
    header names and header values that are not UTF-8 are base64 (kcat prints them raw,
    making the line invalid JSON), flagged: the key by key_encoding, the value by
    payload_encoding, a header name or value by headers_encoding, a list beside headers
    (only when one of them is base64) whose item i is "base64" when headers[i] is, else
    null."""
    def render(r: ConsumerRecord) -> bytes:
        key, kb64 = _text(r.key)
        payload, vb64 = _text(r.value)
        d: dict[str, Any] = {
            "topic": r.topic, "partition": r.partition, "offset": r.offset,
            "tstype": "logappend" if r.timestamp_type == 1 else "create", "ts": r.timestamp,
            "broker": broker_of(r.topic, r.partition),
        }
        if r.headers:
            texts = [_text(x) for k, v in r.headers
                     for x in (k.encode("utf-8", "surrogateescape"), v)]
            d["headers"] = [t for t, _b64 in texts]
            if any(b64 for _t, b64 in texts):
                d["headers_encoding"] = ["base64" if b64 else None for _t, b64 in texts]
        d["key"] = key
        d["payload"] = payload
        if kb64:
            d["key_encoding"] = "base64"
        if vb64:
            d["payload_encoding"] = "base64"
        return json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"

    return render


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
        help="earliest | latest | N | -N (N before the end) | @<ms timestamp> | ISO date "
             "(UTC without a zone, as Kafka's tools read it). "
             "Default: latest, the records produced from now on, as kafka-console-consumer "
             "(kcat's default is the beginning: -o earliest), or -X auto.offset.reset's; "
             "with -G, the group's committed offsets, and that where it has none."),
    from_beginning: bool = typer.Option(False, "--from-beginning",
                                        help="Start at the earliest offset."),
    max_messages: int | None = typer.Option(
        None, "--max-messages", "-c",
        help="Exit after this many records; -1: no limit (the default, as "
             "kafka-console-consumer's and kcat's -1)."),
    exit_at_end: bool = typer.Option(False, "--exit-at-end", "-e",
                                     help="Exit when every partition is read to its end."),
    fmt: str | None = typer.Option(
        None, "--format", "-f",
        help="kcat tokens %t %p %o %k %s %T %h %K %S; \\n \\t. Not with -J, -K or "
             "--print-offsets (%k and %o say where the key and offset go)."),
    as_json: bool = typer.Option(False, "--json", "-J",
                                 help="One JSON object per record (not with -f, -K or "
                                      "--print-offsets)."),
    key_separator: str | None = typer.Option(None, "--key-separator", "-K",
                                             help="Print key SEP value."),
    print_offsets: bool = typer.Option(
        False, "--print-offsets",
        help="Prefix each record with its offset and -K's SEP (a tab without -K): "
             "OFFSET SEP KEY SEP VALUE, the bare offset (kafka-console-consumer's "
             "print.offset writes Offset:OFFSET; -f 'Offset:%o\\t%s\\n' does), its fields "
             "separated by key.separator as there."),
    print_null: bool = typer.Option(
        False, "--print-null", "-Z",
        help="Print a null key or value (a tombstone's) as NULL, not as nothing (kcat's "
             "-Z, for null only: kcat prints an empty value as NULL too; -J prints JSON "
             "null)."),
    null_literal: str | None = typer.Option(
        None, "--null-literal", metavar="STR",
        help="Print a null key or value as STR, taken literally (kafka-console-consumer's "
             "null.literal; also -X null.literal=STR)."),
    group: str | None = typer.Option(
        None, "--group", "-G", "-g",
        help="Consume as a member of this consumer group: the group assigns the "
             "partitions and the consumed offsets are committed."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(
        "Consumer property key=value (repeatable): librdkafka's or Java's names, e.g. "
        "fetch.wait.max.ms, max.partition.fetch.bytes, auto.offset.reset, group.id, "
        "enable.auto.commit, session.timeout.ms, max.poll.interval.ms, max.poll.records "
        "(records a poll hands out; with -G 500 unless given, else no limit), "
        "metadata.max.age.ms (how often -G looks for new partitions and topics), "
        "isolation.level, check.crcs=false, client.id; and the security properties "
        "(security.protocol, sasl.*, ssl.*)."),
    command_config: Path | None = command_config_option(),
    zookeeper: str | None = typer.Option(
        None, "--zookeeper", metavar="HOST:PORT[/CHROOT]",
        help="With --group: a ZooKeeper-coordinated group (the seed's consumer: members, "
             "partition owners and offsets under /consumers/GROUP); brokers are found in "
             "/brokers/ids unless -b is given."),
    offsets_storage: str | None = typer.Option(
        None, "--offsets-storage", show_default="zookeeper",
        help="With --zookeeper: where offsets are kept, zookeeper or kafka (the broker)."),
    dual_commit: bool = typer.Option(
        False, "--dual-commit",
        help="With --offsets-storage kafka: commit to ZooKeeper too (the migration step)."),
    timeout_ms: int | None = typer.Option(
        None, "--timeout-ms", min=1,
        help="Exit when no record arrived for this long (kafka-console-consumer's)."),
    isolation_level: str | None = typer.Option(
        None, "--isolation-level", metavar="LEVEL",
        show_default="read_uncommitted",
        help="read_uncommitted or read_committed: only records of committed transactions, "
             "up to the last stable offset (-X isolation.level); transaction markers are "
             "never printed."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary on stderr."),
) -> None:
    """Print records of the given topics to stdout (value per line by default).

    With -G/--group the consumer joins the group and commits the records its reader has
    taken: written to a file or terminal, or read out of the pipe (on exit, on
    Ctrl-C/SIGTERM, when the reader goes away, before a rebalance and every
    auto.commit.interval.ms), never more. It polls again after writing at most
    max.poll.records (500) records, so a slow reader does not keep it from polling for
    max.poll.interval.ms (which makes it leave the group). When the brokers go away it
    keeps trying for max.poll.interval.ms (5 minutes; -X max.poll.interval.ms=...) before
    it gives up with an error.

    Exit status: 0 when it stops at -e, -c, --timeout-ms, on Ctrl-C or SIGTERM (as kcat:
    the output up to there is whole, and a group commits what was written), and when the
    reader of stdout goes away (`| head`); 1 on an error, among them stdout that cannot be
    written (a full disk: what was written is committed, nothing after it); 2 for a usage
    error."""
    from kafkactl.cli._properties import consumer_options
    from kafkactl.client.consumer import Consumer
    from kafkactl.client.errors import ClientError
    from kafkactl.client.fetcher import EARLIEST, LATEST
    from kafkactl.client.memory import keep_freed_memory
    from kafkactl.client.topic_reader import StartOffset, TopicReader
    from kafkactl.cluster.zookeeper import ZooKeeperUnavailable
    from kafkactl.protocol.errors import KafkaError
    from kafkactl.record.errors import RecordError

    keep_freed_memory()

    null_literal, prop = _null_literal(null_literal, prop)
    security, settings = consumer_options(prop, command_config)
    group_option = "-G/--group"
    if "group_id" in settings.given_as:  # -X group.id: -G must agree
        if group is not None and group != settings.group_id:
            raise fail(f"-G {group} and -X {settings.given_as['group_id']}="
                       f"{settings.group_id} name two groups: give one", 2)
        group = settings.group_id
        group_option = settings.option("group_id")
    elif group is None:  # --command-config's group.id, unless -G overrides it
        group = settings.group_id
        group_option = settings.option("group_id")
    # strings of Kafka's requests: one that is not text is refused before anything is sent
    check_text([(settings.option("client_id"), settings.client_id), (group_option, group),
                (settings.option("group_instance_id"), settings.group_instance_id)])
    if not topic and not topic_pattern:
        raise fail("give -t/--topic (repeatable) or --topic-pattern", 2)
    for name in topic:  # (a name Kafka refuses is told before anything is sent)
        check_topic(name)
    _check_output_options(fmt, as_json, key_separator, print_offsets)
    if zookeeper and not group:
        raise fail("--zookeeper needs -G/--group (a ZooKeeper consumer group)", 2)
    if offsets_storage not in (None, "zookeeper", "kafka"):
        raise fail("--offsets-storage must be zookeeper or kafka", 2)
    if dual_commit and offsets_storage != "kafka":
        raise fail("--dual-commit goes with --offsets-storage kafka", 2)
    if offsets_storage is not None and not zookeeper:
        raise fail(f"--offsets-storage {offsets_storage}"
                   + (" --dual-commit" if dual_commit else "")
                   + ": only with --zookeeper (a ZooKeeper-coordinated group; a group "
                   "without it keeps its offsets in the broker)", 2)
    if zookeeper and topic and topic_pattern:
        raise fail("a ZooKeeper consumer takes -t/--topic or --topic-pattern, not both", 2)
    if offset is not None and from_beginning:
        raise fail("--offset and --from-beginning are mutually exclusive", 2)
    if max_messages is not None and max_messages < -1:
        raise fail(f"-c/--max-messages {max_messages}: give a count, or -1 for no limit", 2)
    if max_messages == -1:  # kafka-console-consumer's default (and kcat's -c -1): no limit
        max_messages = None
    if group and partition:
        raise fail("-p/--partition and -G/--group cannot be given together: the group assigns "
                   "the partitions (read one partition without -G)", 2)
    group_only = settings.group_kwargs()
    if group_only and not group:
        names = ", ".join(sorted(settings.option(f) for f in settings.given()
                                 if f not in settings.consumer_kwargs()))
        raise fail(f"{names}: group settings; give -G/--group too", 2)
    consumer_kw = settings.consumer_kwargs()
    if isolation_level is not None:
        from kafkactl.cli._properties import ISOLATION_LEVELS, one_of

        try:
            level = one_of(ISOLATION_LEVELS)(isolation_level)
        except ValueError as e:
            raise fail(f"--isolation-level {isolation_level}: {e}", 2) from None
        if "isolation_level" in settings.given_as and settings.isolation_level != level:
            raise fail(f"--isolation-level {isolation_level} and "
                       f"{settings.option('isolation_level')} disagree: give one", 2)
        consumer_kw["isolation_level"] = level
    reset = consumer_kw.pop("auto_offset_reset", None)
    try:
        if from_beginning:
            start = StartOffset("earliest", EARLIEST)
        elif offset is not None:
            start = parse_offset(offset)
        elif reset == "earliest":
            start = StartOffset("earliest", EARLIEST)
        else:
            start = StartOffset("latest", LATEST)
        for rx in (topic_pattern, exclude_pattern):
            if rx:
                re.compile(rx)
        sep = unescape(key_separator) if key_separator is not None else None
        null = _null_text(print_null, null_literal, as_json)
        batch_format = None
        kernel_format = None
        render: Any = None
        if fmt is not None:
            render = compile_format(fmt, null)
            batch_format = compile_batch_format(fmt, null)
            kernel_format = compile_kernel_format(fmt, null)
        elif not as_json:
            # -K's SEP goes into a -f format: a % in it is a literal %, not a token
            literal_sep = (key_separator.replace("%", "%%") if key_separator is not None
                           else None)
            parts = []
            if print_offsets:
                parts.append("%o" + (literal_sep if literal_sep is not None else "\\t"))
            if literal_sep is not None:
                parts.append("%k" + literal_sep)
            parts.append("%s\\n")
            render = compile_format("".join(parts), null)
            kernel_format = compile_kernel_format("".join(parts), null)
    except (typer.BadParameter, re.error) as e:
        raise fail(str(e), 2) from None
    if group and start.kind not in ("earliest", "latest"):
        raise fail(f"--offset {offset}: a group starts at its committed offsets; with -G, "
                   "-o takes only earliest or latest (where a partition with no commit "
                   "starts); to move the group, `kafkactl offsets reset`", 2)
    # value (or key SEP value) per line: the reader renders those itself, and header-less
    # batches skip the per-record render
    plain = (fmt is None and not as_json and not print_offsets and not null
             and (sep is None or b"%" not in sep))
    # where a group member with no committed offset starts: -o/--from-beginning, else
    # -X auto.offset.reset (none too), else latest
    if offset is None and not from_beginning and reset is not None:
        group_reset = reset
    else:
        group_reset = "earliest" if start.kind == "earliest" else "latest"

    install_signal_handlers()  # SIGTERM like Ctrl-C: commit, leave the group, exit
    out = RecordWriter()
    t0 = time.monotonic()
    consumer: Consumer | None = None
    group_consumer: GroupConsumer | None = None
    closed = False
    failed: StdoutFailed | None = None
    try:
        if zookeeper:  # the seed's ZooKeeper-coordinated group
            from kafkactl.client.zookeeper_consumer import ZookeeperConsumer

            zk_kw = {k: v for k, v in group_only.items()
                     if k in ("enable_auto_commit", "auto_commit_interval_ms")}
            consumer = ZookeeperConsumer(
                *topic, group_id=group or "", zookeeper=zookeeper,
                pattern=topic_pattern or exclude_pattern, blacklist=bool(exclude_pattern
                                                                      and not topic_pattern),
                bootstrap_servers=bootstrap, auto_offset_reset=group_reset,
                offsets_storage=offsets_storage or "zookeeper", dual_commit=dual_commit,
                security=security, zookeeper_option="--zookeeper",
                on_assign=out.assigned, **zk_kw, **consumer_kw)
        elif group:  # the group assigns partitions, offsets committed
            from kafkactl.client.group import GroupConsumer

            # Java's max.poll.records: a poll's output is written before the next poll,
            # which must come within max.poll.interval.ms however slow the pipe's reader
            consumer_kw.setdefault("max_poll_records", GROUP_MAX_POLL_RECORDS)
            # a member that lost its partitions (expelled) owns none: what its pipe still
            # holds of them is not its to commit, even if they come back to it
            consumer = group_consumer = GroupConsumer(
                *topic, group_id=group, bootstrap_servers=bootstrap, pattern=topic_pattern,
                auto_offset_reset=group_reset, security=security, on_assign=out.assigned,
                on_lost=lambda _lost: out.assigned(()), **group_only, **consumer_kw)
        else:
            consumer = Consumer(*topic, bootstrap_servers=bootstrap, pattern=topic_pattern,
                                exclude=exclude_pattern, partitions=partition or None,
                                auto_offset_reset=reset or "latest", security=security,
                                **consumer_kw)
        out.consumed = consumer.consumed  # what the writer wrote is what a group commits
        if group:  # ... once the reader of a pipe has taken it
            out.track_reads = True
            consumer.before_commit = out.settle
        if render is None:
            from kafkactl.client.record_format import KernelFormat

            render = json_renderer(consumer.client.cluster.leader_for)
            kernel_format = KernelFormat.json(consumer.client.cluster.leader_for)
        idle = _IdleCheck(timeout_ms)
        reader = TopicReader(consumer, max_records=max_messages, until_end=exit_at_end,
                             stop_when_idle=idle, poll_timeout=idle.poll_timeout)
        if not reader.partitions and not group:
            raise fail(_no_partitions_message(topic, topic_pattern, exclude_pattern), 1)
        if not group:
            reader.seek(start)
        lines = reader.lines(key_separator=sep) if plain else reader.lines(
            render, batch_format=batch_format, kernel_format=kernel_format)
        stop = consumer.rebalance_pending
        for pieces in lines:
            unwritten = out.write(pieces, stop)
            idle.saw_records()
            if unwritten:  # a slow reader, and the group rebalances: rejoin, then go on
                reader.give_back(pieces, unwritten)
            if group_consumer is not None and group_consumer.out_of_group():
                _wait_for_reader()
    except KeyboardInterrupt:
        pass
    except StdoutClosed:
        closed = True  # the reader went away: the EPIPE rule, after the summary
    except StdoutFailed as e:  # what was written is counted (and committed), no more
        failed = e
    except (ClientError, KafkaError, RecordError, ValueError, ZooKeeperUnavailable) as e:
        if out.records:  # what was printed before the error (never a bare "0 messages")
            _summary(out.records, t0, quiet)
        raise fail(str(e)) from None
    finally:
        shutting_down()  # further signals: they end the drain wait, never commit/leave
        if consumer is not None:
            out.drain()
            consumer.close()
        out.close()
    if failed is not None:  # the summary (never a bare "0 messages"), then the error
        if out.records:
            _summary(out.records, t0, quiet)
        raise fail(failed.message)
    _summary(out.records, t0, quiet)
    if closed:
        raise StdoutClosed


def _check_output_options(fmt: str | None, as_json: bool, key_separator: str | None,
                          print_offsets: bool) -> None:
    """-f and -J each say all of how a record prints, -K and --print-offsets shape the
    default output: any two of -f, -J and a shaping option together are refused (exit 2)
    rather than one silently ignored."""
    if fmt is not None and as_json:
        raise fail("-f/--format and -J/--json both say how a record prints: give one", 2)
    if fmt is not None and key_separator is not None:
        raise fail("-K/--key-separator does not go with -f/--format: the format says where "
                   "the key goes (-f '%k SEP%s\\n')", 2)
    if fmt is not None and print_offsets:
        raise fail("--print-offsets does not go with -f/--format: put %o in the format", 2)
    if as_json and (key_separator is not None or print_offsets):
        name = "-K/--key-separator" if key_separator is not None else "--print-offsets"
        raise fail(f"{name} does not go with -J/--json: its objects have the key and the "
                   "offset", 2)


def _summary(records: int, t0: float, quiet: bool) -> None:
    if not quiet:
        dt = max(time.monotonic() - t0, 1e-6)
        typer.echo(f"Processed a total of {records:,} messages in {dt:.2f} s", err=True)


class _IdleCheck:
    """The reader's stop_when_idle: the reader of stdout went away, or (--timeout-ms) no
    record arrived for that long."""

    def __init__(self, timeout_ms: int | None) -> None:
        self.timeout = None if timeout_ms is None else timeout_ms / 1000
        self.poll_timeout = 1.0 if self.timeout is None else min(1.0, self.timeout)
        self.last = time.monotonic()

    def saw_records(self) -> None:
        self.last = time.monotonic()

    def __call__(self) -> bool:
        if self.timeout is not None and time.monotonic() - self.last >= self.timeout:
            return True
        return _stdout_closed()


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


def _wait_for_reader() -> None:
    """The group member left (max.poll.interval.ms passed while the reader of stdout took
    nothing) or was expelled: it rejoins once the reader takes records again, as a Java
    consumer rejoins when its poll loop gets to poll again (rejoining sooner would take
    partitions only to stall them until it leaves again). Ctrl-C and SIGTERM stop it."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
    except (OSError, ValueError, AttributeError):
        return
    while not poller.poll(1000):  # POLLERR/POLLHUP (the reader went away) end it too
        pass


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
