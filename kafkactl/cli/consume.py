"""`kafkactl consume`: records of one or more topics to stdout."""

from __future__ import annotations

import base64
import json
import os
import re
import select
import signal
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import bootstrap_option, fail, unescape
from kafkactl.cli._output import StdoutClosed, is_epipe

if TYPE_CHECKING:  # the client is imported when a command runs, so --help stays fast
    from kafkactl.client.consumer import Consumer
    from kafkactl.client.fetcher import ConsumerRecord

TOKEN = re.compile(rb"%[tpokKsSTh%]")


def parse_offset(spec: str) -> tuple[str, int]:
    """-> ("earliest"|"latest"|"absolute"|"relative"|"timestamp", value)."""
    from kafkactl.client.fetcher import EARLIEST, LATEST

    s = spec.strip()
    low = s.lower()
    if low in ("earliest", "beginning", "start"):
        return ("earliest", EARLIEST)
    if low in ("latest", "end"):
        return ("latest", LATEST)
    if re.fullmatch(r"\d+", s):
        return ("absolute", int(s))
    if re.fullmatch(r"-\d+", s):
        return ("relative", int(s))
    if s.startswith("@") and re.fullmatch(r"@\d+", s):
        return ("timestamp", int(s[1:]))
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(
            f"--offset {spec!r}: use earliest, latest, N, -N (from the end), @<ms timestamp> "
            "or an ISO date such as 2024-05-01T12:00:00") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local time, like the shell tools
    return ("timestamp", int(dt.astimezone(UTC).timestamp() * 1000))


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


def plain_lines(batch: Any, fetch_offset: int, sep: bytes | None, limit: int | None
                ) -> tuple[bytes, int] | None:
    """`value\n` (or `key SEP value\n`) for every record of a header-less magic-2 batch
    from fetch_offset on (at most `limit`), joined in C; (lines, count), or None when the
    batch needs the per-record render. Null keys and values print as nothing."""
    from kafkactl.record.value_scan import fast_key_values, fast_values

    if batch.magic != 2:
        return None
    keys: Any = None
    if sep is None:
        values: Any = fast_values(batch, fetch_offset)
        if values is None:
            return None
    else:
        found = fast_key_values(batch, fetch_offset)
        if found is None:
            return None
        keys, values = found
    if limit is not None and len(values) > limit:
        values = values[:limit]
        keys = keys[:limit] if keys is not None else None
    n = len(values)
    if n == 0:
        return b"", 0
    if None in values:
        values = [b"" if v is None else v for v in values]
    if keys is None:
        return b"\n".join(values) + b"\n", n
    if None in keys:
        keys = [b"" if k is None else k for k in keys]
    parts: list[bytes | None] = [b"\n"] * (4 * n)
    parts[0::4] = keys
    parts[1::4] = [sep] * n
    parts[2::4] = values
    return b"".join(parts), n  # type: ignore[arg-type]  # no None is left


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _group_source(group: str) -> Any:
    """Consumer groups: `--group G` consumes through kafkactl.client.group.GroupConsumer."""
    from kafkactl.client.group import GroupConsumer

    return GroupConsumer


def consume(
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
    from kafkactl.client.fetcher import EARLIEST, LATEST, ConsumerRecord
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
        start = ("earliest", EARLIEST) if from_beginning else (
            parse_offset(offset) if offset is not None else ("latest", LATEST))
        for rx in (topic_pattern, exclude_pattern):
            if rx:
                re.compile(rx)
        sep = unescape(key_separator) if key_separator is not None else None
        if fmt is not None:
            render = compile_format(fmt)
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
    # value (or key SEP value) per line: header-less batches skip the per-record render
    plain = fmt is None and not as_json and not print_offsets and (sep is None or b"%" not in sep)
    source = _group_source(group) if group else None

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)  # like Ctrl-C: commit, leave the group, exit
    out = RecordWriter()
    t0 = time.monotonic()
    consumer: Consumer | None = None
    closed = False
    try:
        reset = "earliest" if start[0] == "earliest" else "latest"
        if zookeeper:  # the seed's ZooKeeper-coordinated group
            from kafkactl.client.zookeeper_consumer import ZookeeperConsumer

            consumer = ZookeeperConsumer(
                *topic, group_id=group or "", zookeeper=zookeeper,
                pattern=topic_pattern or exclude_pattern, blacklist=bool(exclude_pattern
                                                                      and not topic_pattern),
                bootstrap_servers=bootstrap, auto_offset_reset=reset,
                offsets_storage=offsets_storage, dual_commit=dual_commit)
        elif source is not None:  # --group: the group assigns partitions, offsets committed
            consumer = source(*topic, group_id=group, bootstrap_servers=bootstrap,
                              pattern=topic_pattern, auto_offset_reset=reset)
        else:
            consumer = Consumer(*topic, bootstrap_servers=bootstrap, pattern=topic_pattern,
                                exclude=exclude_pattern, partitions=partition or None,
                                auto_offset_reset=reset)
        tps = sorted(consumer.assignment())
        if not tps and source is None and not zookeeper:
            raise fail(_no_partitions_message(topic, topic_pattern, exclude_pattern), 1)
        if source is None and not zookeeper:
            _position(consumer, tps, start)
        ends = consumer.end_offsets(tps) if exit_at_end else {}
        remaining = max_messages
        while remaining is None or remaining > 0:
            if exit_at_end and all(consumer.position(tp) >= max(ends[tp], consumer.
                                   high_watermarks.get(tp, ends[tp])) for tp in tps):
                break
            chunks = consumer.poll_fetches(1.0)
            if not chunks and _stdout_closed():
                break
            buf: list[tuple[bytes, int]] = []
            for pf in chunks:
                for b in pf.batches():
                    fast = plain_lines(b, pf.fetch_offset, sep, remaining) if plain else None
                    if fast is not None:
                        buf.append(fast)
                        n = fast[1]
                    else:
                        n = 0
                        tstype = int(b.timestamp_type)
                        for r in b:
                            if r.offset < pf.fetch_offset:
                                continue
                            if remaining is not None and n >= remaining:
                                break
                            buf.append((render(ConsumerRecord(
                                pf.topic, pf.partition, r.offset, r.timestamp, tstype, r.key,
                                r.value, r.headers)), 1))
                            n += 1
                    if remaining is not None:
                        remaining -= n
                        if remaining <= 0:
                            break
                if remaining is not None and remaining <= 0:
                    break
            if buf:
                out.write(buf)
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


class RecordWriter:
    """Writes rendered records to stdout (fd 1, unbuffered) and counts the records written
    in full, so that the summary counts what reached the pipe, not what was read."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self.fd = sys.stdout.fileno()
        self.records = 0

    def write(self, pieces: list[tuple[bytes, int]]) -> None:
        """`pieces`: (bytes, number of records in them), each record ending in a newline
        when a piece holds more than one. Raises StdoutClosed when the reader went away."""
        data = memoryview(b"".join(p for p, _ in pieces))
        off = 0
        try:
            while off < len(data):
                try:
                    off += os.write(self.fd, data[off:])
                except BlockingIOError:  # a non-blocking stdout (shared with a parent)
                    select.select([], [self.fd], [])
        except OSError as e:
            if not is_epipe(e):
                raise
            self.records += _complete_records(pieces, off)
            raise StdoutClosed from None
        self.records += sum(n for _, n in pieces)


def _complete_records(pieces: list[tuple[bytes, int]], written: int) -> int:
    """Records wholly inside the first `written` bytes of the joined pieces."""
    done = 0
    for piece, n in pieces:
        if written >= len(piece):
            done += n
            written -= len(piece)
            continue
        if n > 1:  # a batch's lines: each record ends with its newline
            done += min(piece.count(b"\n", 0, written), n)
        break
    return done


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


def _position(consumer: Consumer, tps: list[Any], start: tuple[str, int]) -> None:
    kind, value = start
    if kind == "earliest":
        consumer.seek_to_beginning(*tps)
    elif kind == "latest":
        consumer.seek_to_end(*tps)
    elif kind == "absolute":
        lo, hi = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, min(max(value, lo[tp]), hi[tp]))
    elif kind == "relative":
        lo, hi = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, max(lo[tp], hi[tp] + value))
    else:
        found = consumer.offsets_for_times({tp: value for tp in tps})
        hi = consumer.end_offsets(tps)
        for tp in tps:
            f = found[tp]
            consumer.seek(tp, hi[tp] if f is None else f[0])


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
