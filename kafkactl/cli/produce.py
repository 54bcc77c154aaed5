"""`kafkactl produce`: records from stdin or a file into a topic."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import (
    SECURITY_PROPERTIES,
    bootstrap_option,
    client_properties,
    command_config_option,
    fail,
    property_option,
    stderr_is_tty,
    unescape,
)

if TYPE_CHECKING:  # the client is imported when a command runs, so --help stays fast
    from kafkactl.client.line_producer import DeliveryStats, LineProducer


def _progress(stats: DeliveryStats, stop: threading.Event) -> None:
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
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(
        "Producer property key=value (repeatable): Kafka's names (linger.ms, acks, ...) and "
        f"the client's, librdkafka's names: {SECURITY_PROPERTIES}."),
    command_config: Path | None = command_config_option(),
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
    from kafkactl.client.line_producer import LineProducer
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
        props = client_properties(prop, command_config, check=False)
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
    t0 = time.monotonic()  # the summary's time includes connecting
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
    lp = LineProducer(producer, topic, partition=partition, key_separator=ksep,
                      headers=headers, keep_failed=failed_file is not None)
    lp.stats.start = t0
    stop = threading.Event()
    progress = None
    if not quiet and stderr_is_tty():
        progress = threading.Thread(target=_progress, args=(lp.stats, stop), daemon=True)
        progress.start()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    outcome = lp.run(_input(file, delim))
    if discovery is not None:
        discovery.close()
    stop.set()
    if progress is not None:
        progress.join(1.0)
    _report(lp, topic, delim, failed_file, quiet, outcome.interrupted, outcome.error)


def _input(file: Path | None, delimiter: bytes) -> Iterator[list[bytes]]:
    """The records of --file or stdin, a chunk at a time (opened when first read, so that
    an error opening the file is the run's error like any other)."""
    from kafkactl.client.delimited import read_records

    if file is None:
        yield from read_records(sys.stdin.buffer, delimiter)
        return
    with open(file, "rb") as stream:
        yield from read_records(stream, delimiter)


def _cause(e: BaseException) -> str:
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    if isinstance(e, (ClientError, KafkaError, ValueError, OSError)):
        return str(e)
    return f"{type(e).__name__}: {e} (a bug in kafkactl: please report it)"


def _report(lp: LineProducer, topic: str, delim: bytes, failed_file: Path | None,
            quiet: bool, interrupted: bool, error: BaseException | None) -> None:
    """One line: the summary when every record read was acknowledged, else one `error:`
    line with how many were and were not; exit 1 on failure, 130 on Ctrl-C."""
    stats = lp.stats
    unsent = lp.unsent()
    read = lp.read
    acked = stats.acked
    not_acked = read - acked
    kept_in = ""
    if failed_file is not None and not_acked:
        try:
            with open(failed_file, "wb") as f:
                for raw in lp.failed_records():
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
    if error is not None and not lp.input_done:
        line += f"; stopped reading the input after record {read:,}"
    typer.echo(line, err=True)
    raise typer.Exit(130 if interrupted and error is None and not stats.failed else 1)


def register(app: typer.Typer) -> None:
    app.command("produce")(produce)
