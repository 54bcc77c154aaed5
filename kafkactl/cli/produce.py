"""`kafkactl produce`: records from stdin or a file into a topic."""

from __future__ import annotations

import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import nullcontext
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
    from kafkactl.client.producer import Producer
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
    """Counts of the run, updated by the sender thread's batch callbacks."""

    def __init__(self) -> None:
        self.sent = 0  # records handed to the producer
        self.bytes = 0
        self.acked = 0
        self.failed = 0  # records of batches that failed
        self.failed_entries: list[Any] = []
        self.first_error: BaseException | None = None
        self.lock = threading.Lock()
        self.start = time.monotonic()
        # entries of the batches acknowledged since the current input chunk was read, while
        # a chunk whose records are not handed over in input order is being sent (see
        # Pipeline.unsent_of_chunk); None otherwise
        self.recent_acked: list[list[Any]] | None = None

    def on_batch(self, batch: ProducerBatch, base_offset: int, error: BaseException | None,
                 ) -> None:
        with self.lock:
            if error is None:
                self.acked += batch.record_count
                if self.recent_acked is not None:
                    self.recent_acked.append(batch.entries)
            else:
                self.failed += batch.record_count
                self.failed_entries.extend(batch.entries)
                if self.first_error is None:
                    self.first_error = error

    @property
    def handed_and_done(self) -> int:
        """Records the producer acknowledged or failed (after abort(): all it was given)."""
        with self.lock:
            return self.acked + self.failed


def entry_bytes(entry: Any) -> bytes:
    """A kept entry is the raw input record, or (sequence number, raw record) where the
    order of hand-over is not the input order (the keyed path over several partitions)."""
    return entry[1] if isinstance(entry, tuple) else entry


class Pipeline:
    """Hands the input, chunk by chunk, to the producer. When the run stops part-way it
    knows which records of the chunk being sent the producer never got (`unsent`), so that
    every record read is either acknowledged or reported (and kept with --failed-file)."""

    def __init__(self, producer: Producer, stats: Stats, topic: str, partition: int | None,
                 ksep: bytes | None, headers: list[tuple[str, bytes | None]], keep: bool,
                 sync: bool) -> None:
        self.producer = producer
        self.stats = stats
        self.topic = topic
        self.partition = partition
        self.ksep = ksep
        self.headers = headers
        self.keep = keep
        self.simple = ksep is None and not headers and not sync
        self.keyed = ksep is not None and not headers and not sync
        self.chunk: list[bytes] = []  # the chunk being handed over; [] between chunks
        self.chunk_base = 0  # stats.sent when it was read
        self.tagged: list[tuple[int, bytes]] | None = None
        self.input_done = False

    def run(self, stream: IO[bytes], delimiter: bytes) -> None:
        stats = self.stats
        for records in read_records(stream, delimiter):
            self.chunk = records
            self.chunk_base = stats.sent
            self.tagged = None
            self._send(records)
            stats.sent = self.chunk_base + len(records)
            self.chunk = []
        self.input_done = True

    def _send(self, records: list[bytes]) -> None:
        producer, stats, topic, partition = self.producer, self.stats, self.topic, self.partition
        if self.simple:
            producer.send_values(topic, records, partition=partition, keep_entries=self.keep)
            stats.bytes += sum(map(len, records))
            return
        if self.keyed:
            keys, values = split_keys(records, self.ksep)  # type: ignore[arg-type]
            entries: list[Any] | None = None
            if self.keep and partition is None:
                # records are handed over grouped by partition, not in input order: tag
                # each with its sequence number to tell later which ones were handed over
                entries = self.tagged = list(enumerate(records, self.chunk_base))
                with stats.lock:
                    stats.recent_acked = []
            elif self.keep:
                entries = records
            producer.send_key_values(topic, keys, values, partition=partition,
                                     entries=entries)
            stats.bytes += sum(map(len, records))
            return
        ksep, headers, keep = self.ksep, self.headers, self.keep
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

    def unsent(self) -> list[bytes]:
        """Records of the interrupted chunk the producer never got; call after abort(),
        when every record it got was acknowledged or failed."""
        if not self.chunk:
            return []
        stats = self.stats
        if self.tagged is not None:
            with stats.lock:
                got = {e[0] for batch in stats.recent_acked or () for e in batch
                       if isinstance(e, tuple)}
                got.update(e[0] for e in stats.failed_entries if isinstance(e, tuple))
            return [raw for n, raw in self.tagged if n not in got]
        # every other path hands records over in input order: the first `handed` went
        handed = min(max(stats.handed_and_done - self.chunk_base, 0), len(self.chunk))
        return self.chunk[handed:]

    @property
    def read(self) -> int:
        """Records read from the input so far."""
        return self.chunk_base + len(self.chunk) if self.chunk else self.stats.sent


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
    zookeeper: str | None = typer.Option(
        None, "--zookeeper", metavar="HOST:PORT[/CHROOT]",
        help="Find the brokers in ZooKeeper's registry (/brokers/ids) and follow it; "
             "-b/--bootstrap-server is the static alternative."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or summary."),
    failed_file: Path | None = typer.Option(
        None, "--failed-file", help="Write records that were not acknowledged here."),
) -> None:
    """Produce records read from stdin (or --file), one per line by default."""
    from kafkactl.client.errors import ClientError
    from kafkactl.client.producer import Producer, parse_acks, parse_compression

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
    discovery = None
    try:
        if zookeeper:
            from kafkactl.client.zookeeper_discovery import ZookeeperBrokerDiscovery

            if bootstrap:
                raise ValueError("give --zookeeper or -b/--bootstrap-server, not both")
            discovery = ZookeeperBrokerDiscovery(zookeeper)
            kwargs["bootstrap_servers"] = discovery.bootstrap()
        producer = Producer.from_properties(props, **kwargs)
        if discovery is not None:
            discovery.attach(producer.client)
    except Exception as e:  # noqa: BLE001 - ZooKeeper, config and client errors alike
        if discovery is not None:
            discovery.close()
        from kafkactl.cluster.zookeeper import ZooKeeperUnavailable

        if not isinstance(e, ValueError | ClientError | ZooKeeperUnavailable):
            raise
        raise fail(str(e), 2 if isinstance(e, ValueError) else 1) from None
    producer.add_batch_callback(stats.on_batch)
    keep = failed_file is not None
    stop = threading.Event()
    progress = None
    if not quiet and stderr_is_tty():
        progress = threading.Thread(target=_progress, args=(stats, stop), daemon=True)
        progress.start()
    interrupted = False
    error: BaseException | None = None
    pipeline = Pipeline(producer, stats, topic, partition, ksep, headers, keep, sync)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with open(file, "rb") if file else nullcontext(sys.stdin.buffer) as stream:
            pipeline.run(stream, delim)
    except KeyboardInterrupt:
        interrupted = True
    except Exception as e:  # noqa: BLE001 - whatever stops the run, report every record
        error = e
    # What the producer was given is flushed whatever stopped the run: acknowledged
    # records stay acknowledged; the rest are counted (and kept with --failed-file).
    try:
        producer.flush(30.0 if interrupted or error else None)
    except KeyboardInterrupt:
        interrupted = True
    except Exception as e:  # noqa: BLE001
        error = error or e
    producer.abort()
    if discovery is not None:
        discovery.close()
    stop.set()
    if progress is not None:
        progress.join(1.0)
    _report(stats, pipeline, topic, delim, failed_file, quiet, interrupted, error)


def _cause(e: BaseException) -> str:
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    if isinstance(e, (ClientError, KafkaError, ValueError, OSError)):
        return str(e)
    return f"{type(e).__name__}: {e} (a bug in kafkactl: please report it)"


def _report(stats: Stats, pipeline: Pipeline, topic: str, delim: bytes,
            failed_file: Path | None, quiet: bool, interrupted: bool,
            error: BaseException | None) -> None:
    """One line: the summary when every record read was acknowledged, else one `error:`
    line with how many were and were not; exit 1 on failure, 130 on Ctrl-C."""
    unsent = pipeline.unsent()
    read = pipeline.read
    acked = stats.acked
    not_acked = read - acked
    kept_in = ""
    if failed_file is not None and not_acked:
        try:
            with open(failed_file, "wb") as f:
                for entry in stats.failed_entries:
                    f.write(entry_bytes(entry) + delim)
                for raw in unsent:
                    f.write(raw + delim)
            kept_in = f"; the {not_acked:,} are in {failed_file}"
        except OSError as e:
            kept_in = f"; they could NOT be written to {failed_file}: {e.strerror or e}"
    if error is None and not not_acked:
        if interrupted and read == 0:
            raise typer.Exit(130)  # Ctrl-C before anything was read: nothing to say
        if not quiet:
            dt = max(time.monotonic() - stats.start, 1e-6)
            typer.echo(f"{acked:,} of {read:,} records acknowledged "
                       f"({stats.bytes / 1e6:,.1f} MB) to {topic} in {dt:.2f} s "
                       f"({stats.sent / dt:,.0f} records/s)"
                       + (" (interrupted)" if interrupted else ""), err=True)
        if interrupted:
            raise typer.Exit(130)
        return
    cause = error or stats.first_error
    why = _cause(cause) if cause is not None else "interrupted"
    if read == 0:
        typer.echo(f"error: {why}", err=True)
        raise typer.Exit(1 if error is not None or not interrupted else 130)
    line = f"error: {acked:,} of {read:,} records acknowledged, {not_acked:,} not"
    if unsent:
        line += f" ({len(unsent):,} read but never sent)"
    line += f": {why}"
    if failed_file is not None:
        line += kept_in
    else:
        line += " (--failed-file FILE keeps them)"
    if error is not None and not pipeline.input_done:
        line += f"; stopped reading the input after record {read:,}"
    typer.echo(line, err=True)
    raise typer.Exit(130 if interrupted and error is None and not stats.failed else 1)


def register(app: typer.Typer) -> None:
    app.command("produce")(produce)
