"""`kafkactl produce`: records from stdin or a file into a topic."""

from __future__ import annotations

import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    fail,
    parse_key_values,
    stderr_is_tty,
    unescape,
)

if TYPE_CHECKING:  # the client is imported when a command runs, so --help stays fast
    from kafkactl.client.producer_batch import ProducerBatch

CHUNK = 4 << 20


def read_chunks(stream: IO[bytes]) -> Iterator[bytes]:
    """Chunks of up to CHUNK bytes as they arrive: a slow writer (`tail -f file |`) gets
    each line sent as soon as it is read, while a fast one (`seq 1 1e7 |`, a file) still
    fills whole chunks: after a short read, more is taken only while the descriptor has
    bytes ready."""
    read1 = getattr(stream, "read1", None)
    try:
        fd: int | None = stream.fileno()
    except (OSError, ValueError, AttributeError):
        fd = None
    if read1 is None or fd is None:
        while chunk := stream.read(CHUNK):
            yield chunk
        return
    while chunk := read1(CHUNK):
        if len(chunk) < CHUNK:
            parts = [chunk]
            size = len(chunk)
            while size < CHUNK and select.select([fd], [], [], 0)[0]:
                more = read1(CHUNK - size)
                if not more:
                    break
                parts.append(more)
                size += len(more)
            if len(parts) > 1:
                chunk = b"".join(parts)
        yield chunk


def read_records(stream: IO[bytes], delimiter: bytes) -> Any:
    """Yield lists of records split on `delimiter` (a trailing delimiter ends the last one;
    an unterminated last record is still a record)."""
    pending: list[bytes] = []  # the start of a record longer than the chunks so far
    single = len(delimiter) == 1  # a longer delimiter may straddle two chunks
    for chunk in read_chunks(stream):
        if single and pending and delimiter not in chunk:
            pending.append(chunk)  # a huge record: join once, not once per chunk
            continue
        data = b"".join((*pending, chunk)) if pending else chunk
        parts = data.split(delimiter)
        rest = parts.pop()
        pending = [rest] if rest else []
        if parts:
            yield parts
    if pending:
        yield [b"".join(pending)]


def split_keys(records: list[bytes], separator: bytes) -> tuple[list[bytes | None],
                                                                 list[bytes]]:
    """key SEP value -> (key, value); a record without SEP has a null key."""
    keys: list[bytes | None] = []
    values: list[bytes] = []
    key_append, value_append = keys.append, values.append
    for raw in records:
        k, sep, v = raw.partition(separator)
        if sep:
            key_append(k)
            value_append(v)
        else:
            key_append(None)
            value_append(raw)
    return keys, values


class Stats:
    def __init__(self) -> None:
        self.sent = 0
        self.bytes = 0
        self.acked = 0
        self.failed = 0
        self.failed_entries: list[Any] = []
        self.first_error: BaseException | None = None
        self.lock = threading.Lock()
        self.start = time.monotonic()

    def on_batch(self, batch: ProducerBatch, base_offset: int, error: BaseException | None,
                 ) -> None:
        with self.lock:
            if error is None:
                self.acked += batch.record_count
            else:
                self.failed += batch.record_count
                self.failed_entries.extend(batch.entries)
                if self.first_error is None:
                    self.first_error = error


def _progress(stats: Stats, stop: threading.Event) -> None:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console(stderr=True)
    with Live(console=console, refresh_per_second=4, transient=True) as live:
        while not stop.wait(0.25):
            dt = max(time.monotonic() - stats.start, 1e-6)
            live.update(Text(f"{stats.sent:,} records  {stats.bytes / 1e6:,.1f} MB  "
                             f"{stats.sent / dt:,.0f} records/s  acked {stats.acked:,}"))


def produce(
    topic: str = typer.Option(..., "--topic", "-t", help="Topic to write to."),
    file: Path | None = typer.Option(None, "--file", "-f", help="Read this file, not stdin.",
                                     exists=True, dir_okay=False, readable=True),
    delimiter: str = typer.Option("\\n", "--delimiter", "-D",
                                  help="Record delimiter (escapes \\n \\t \\xNN)."),
    null_delimited: bool = typer.Option(False, "--null-delimited", "-0",
                                        help="Records are separated by NUL bytes."),
    key_separator: str | None = typer.Option(
        None, "--key-separator", "-K", help="Split each record into key SEP value."),
    header: list[str] = typer.Option(
        [], "--header", "-H", help="k=v header on every record (repeatable; k alone = null)."),
    partition: int | None = typer.Option(None, "--partition", "-p",
                                         help="Write every record to this partition."),
    compression: str = typer.Option("none", "--compression", "-z",
                                    help="none, gzip, snappy, lz4 or zstd."),
    acks: str = typer.Option("all", "--acks", help="0, 1 or all."),
    batch_size: int = typer.Option(1_000_000, "--batch-size", help="Max bytes per batch."),
    linger_ms: int = typer.Option(5, "--linger-ms", help="Wait up to this long to fill a batch."),
    sync: bool = typer.Option(False, "--sync", help="Send each record and wait for its ack."),
    partitioner: str = typer.Option(
        "murmur2", "--partitioner",
        help="murmur2 (Java client), crc32 (librdkafka consistent), random, roundrobin, "
             "or module:function."),
    prop: list[str] = typer.Option([], "--property", "-X",
                                   help="Any producer property key=value (repeatable)."),
    bootstrap: str | None = bootstrap_option(),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or summary."),
    failed_file: Path | None = typer.Option(
        None, "--failed-file", help="Write records that were not acknowledged here."),
) -> None:
    """Produce records read from stdin (or --file), one per line by default."""
    from kafkactl.client.errors import ClientError
    from kafkactl.client.producer import Producer, parse_acks, parse_compression
    from kafkactl.protocol.errors import KafkaError

    try:
        delim = b"\x00" if null_delimited else unescape(delimiter)
        if not delim:
            raise typer.BadParameter("the delimiter must not be empty")
        ksep = unescape(key_separator) if key_separator is not None else None
        headers: list[tuple[str, bytes | None]] = []
        for h in header:
            k, sep, v = h.partition("=")
            if not k:
                raise typer.BadParameter(f"header {h!r} must look like key=value")
            headers.append((k, v.encode() if sep else None))
        props = parse_key_values(prop, "property")
        parse_acks(acks)
        parse_compression(compression)
    except (typer.BadParameter, ValueError) as e:
        raise fail(str(e), 2) from None

    kwargs: dict[str, Any] = {
        "bootstrap_servers": bootstrap, "acks": acks, "compression_type": compression,
        "batch_size": batch_size, "linger_ms": linger_ms, "partitioner": partitioner,
        "max_request_size": max(1048576, batch_size + 1024),
        "buffer_memory": max(64 << 20, 4 * batch_size), "sync": sync,
    }
    stats = Stats()
    try:
        producer = Producer.from_properties(props, **kwargs)
    except (ValueError, ClientError) as e:
        raise fail(str(e), 2) from None
    producer.add_batch_callback(stats.on_batch)
    keep = failed_file is not None
    stop = threading.Event()
    progress = None
    if not quiet and stderr_is_tty():
        progress = threading.Thread(target=_progress, args=(stats, stop), daemon=True)
        progress.start()
    interrupted = False
    error: BaseException | None = None
    stream = open(file, "rb") if file else sys.stdin.buffer  # noqa: SIM115
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        simple = ksep is None and not headers
        keyed = ksep is not None and not headers
        for records in read_records(stream, delim):
            if simple and not sync:
                producer.send_values(topic, records, partition=partition, keep_entries=keep)
                stats.sent += len(records)
                stats.bytes += sum(map(len, records))
                continue
            if keyed and not sync:
                keys, values = split_keys(records, ksep)  # type: ignore[arg-type]
                producer.send_key_values(topic, keys, values, partition=partition,
                                         entries=records if keep else None)
                stats.sent += len(records)
                stats.bytes += sum(map(len, records))
                continue
            for raw in records:
                key = None
                value = raw
                if ksep is not None:
                    k, sep, v = raw.partition(ksep)
                    if sep:
                        key, value = k, v
                producer.send(topic, value, key, partition=partition, headers=headers,
                              entry=raw if keep else None)
                stats.sent += 1
                stats.bytes += len(raw)
    except KeyboardInterrupt:
        interrupted = True
    except (ClientError, KafkaError, ValueError, OSError) as e:
        error = e
    finally:
        if file:
            stream.close()
    try:
        producer.flush(30.0 if interrupted or error else None)
    except KeyboardInterrupt:
        interrupted = True
    producer.abort()
    stop.set()
    if progress is not None:
        progress.join(1.0)

    unacked = stats.sent - stats.acked
    if failed_file is not None and (stats.failed_entries or unacked):
        with open(failed_file, "wb") as f:
            for e in stats.failed_entries:
                f.write(e + delim)
    dt = max(time.monotonic() - stats.start, 1e-6)
    if not quiet:
        typer.echo(f"{stats.acked:,} of {stats.sent:,} records acknowledged "
                   f"({stats.bytes / 1e6:,.1f} MB) to {topic} in {dt:.2f} s "
                   f"({stats.sent / dt:,.0f} records/s)", err=True)
    if error is not None or unacked or interrupted:
        cause = error or stats.first_error
        why = f": {cause}" if cause else (" (interrupted)" if interrupted else "")
        if unacked or not cause:
            typer.echo(f"error: {unacked:,} records were not acknowledged{why}"
                       + (f"; written to {failed_file}" if failed_file and unacked else ""),
                       err=True)
        else:
            typer.echo(f"error: {cause}", err=True)
        raise typer.Exit(130 if interrupted and not error and not stats.failed else 1)


def register(app: typer.Typer) -> None:
    app.command("produce")(produce)
