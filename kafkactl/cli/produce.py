"""`kafkactl produce`: records from stdin or a file into a topic."""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import (
    SECURITY_PROPERTIES,
    bootstrap_option,
    check_text,
    command_config_option,
    fail,
    flag_or_property,
    is_text,
    printable,
    property_option,
    stderr_is_tty,
    unescape,
)
from kafkactl.cli._properties import (
    ACKS,
    COMPRESSION,
    PRODUCER_TABLE,
    ProducerSettings,
    names_help,
    one_of,
    partitioner_name,
    producer_options,
)
from kafkactl.cli._topic_name import check_topic

if TYPE_CHECKING:  # the client is imported when a command runs, so --help stays fast
    from kafkactl.cli._failed_file import FailedFile
    from kafkactl.client.delimited import Block, Limit, LongRecord
    from kafkactl.client.line_producer import DeliveryStats, LineProducer, RunOutcome
    from kafkactl.client.producer import RecordSizeError
    from kafkactl.client.transactional_lines import TransactionOutcome


PROPERTY_HELP = (
    "Producer property key=value (repeatable), Java's or librdkafka's name: "
    f"{names_help(PRODUCER_TABLE)}; and the security ones: {SECURITY_PROPERTIES}. "
    "batch.num.messages is accepted but changes nothing (batches are bounded by batch.size). "
    "null.marker (Kafka's console producer's) is --null-marker. "
    "A flag and -X for the same setting must agree.")

DEFAULTS: dict[str, Any] = {"acks": "all", "compression_type": "none", "batch_size": 1_000_000,
                            "linger_ms": 5, "partitioner": "murmur2"}

# Kafka's console producer's name for --null-marker (--property null.marker=STR; KIP-810)
NULL_MARKER_PROPERTY = "null.marker"

# the other properties of Kafka's console producer's line reader (--property) -> what
# kafkactl takes instead (not producer properties: without this, -X named the closest one)
READER_PROPERTIES = {
    **dict.fromkeys(("parse.key", "key.separator"), "-K/--key-separator SEP"),
    **dict.fromkeys(("parse.headers", "headers.delimiter", "headers.separator",
                     "headers.key.separator"),
                    "-H k=v (headers are the same on every record, not read from the input)"),
    "ignore.error": "-K/--key-separator SEP (a record without SEP has a null key)",
}

# --transactional-id's transaction.timeout.ms: Kafka's transaction.max.timeout.ms default
TRANSACTION_TIMEOUT_MS = 900_000

# Ctrl-C and SIGTERM (kill, timeout, systemd, docker stop) stop a run alike: what was
# handed over is flushed (or the open transaction aborted), the summary says what made it,
# and the exit status is 128 + the signal's number (130, 143)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# librdkafka's partitioners kafkactl has under their own names only (the others are mapped
# by _properties.partitioner_name: consistent is crc32, murmur2_random murmur2)
LIBRDKAFKA_PARTITIONERS = ("consistent_random", "fnv1a", "fnv1a_random")


def _partitioner(text: str) -> str:
    name = text.strip().lower()
    return name if name in LIBRDKAFKA_PARTITIONERS else partitioner_name(text)


# flag -> (the Producer keyword it sets, the parser of its value, as -X's)
FLAG_SETTINGS: dict[str, tuple[str, Callable[[Any], Any] | None]] = {
    "--compression": ("compression_type", one_of(COMPRESSION)),
    "--acks": ("acks", one_of(ACKS)),
    "--batch-size": ("batch_size", None),
    "--linger-ms": ("linger_ms", None),
    "--partitioner": ("partitioner", _partitioner),
    "--transactional-id": ("transactional_id", None),
}


def _producer_kwargs(settings: ProducerSettings, flags: dict[str, Any]) -> dict[str, Any]:
    """Producer keywords from the flags and -X: a flag and an -X property for the same
    setting must agree (else exit 2, naming both); what neither gives takes produce's
    defaults, which differ from the Java client's where a pipe of lines is better served
    (1 MB batches, max.request.size and buffer.memory to fit; buffer.memory holds a
    record max.request.size allows, as librdkafka's queue takes one message.max.bytes
    allows: the producer refuses one larger than either)."""
    kwargs: dict[str, Any] = {**DEFAULTS, **settings.producer_kwargs()}
    for flag, raw in flags.items():
        if raw is None:
            continue
        name, parse = FLAG_SETTINGS[flag]
        shown = _shown(raw)
        try:
            value = parse(raw) if parse is not None else raw
        except ValueError as e:
            raise fail(f"{flag} {shown}: {e}", 2) from None
        if name in settings.given_as and _differ(getattr(settings, name), value):
            raise fail(f"{flag} {shown} and {settings.option(name)}="
                       f"{_shown(getattr(settings, name))} disagree: give one", 2)
        kwargs[name] = value
    if "delivery_timeout_ms" in settings.given_as or "delivery_timeout_ms" in \
            settings.from_file:
        # (Java's KafkaProducer refuses it when set: a record could expire before its
        # first request had the chance to be answered)
        least = int(kwargs.get("linger_ms", 0)) + int(kwargs.get("request_timeout_ms", 30000))
        if kwargs["delivery_timeout_ms"] < least:
            raise fail(f"{settings.option('delivery_timeout_ms')}="
                       f"{kwargs['delivery_timeout_ms']}: delivery.timeout.ms should be "
                       f"equal to or larger than linger.ms + request.timeout.ms ({least})", 2)
    batch = kwargs["batch_size"]
    kwargs.setdefault("max_request_size", max(1048576, batch + 1024))
    kwargs.setdefault("buffer_memory", max(64 << 20, 4 * batch, kwargs["max_request_size"]))
    return kwargs


def _shown(value: Any) -> Any:
    """A flag's value as given: --linger-ms 10 (a float option) is 10, not 10.0."""
    return f"{value:g}" if isinstance(value, float) else value


def _differ(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) != float(b)
    return bool(a != b)


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


class _StopSignals:
    """SIGINT's and SIGTERM's handler in the main thread: KeyboardInterrupt, whichever came
    (LineProducer and run_in_transactions end a run on it), noting which for the exit
    status (the last one). Once the run is finishing (`finish()`: the producer stopped, the
    summary and --failed-file being written) a signal is only noted: what is left is
    finished, then the exit status is the signal's; a second one gives it up (a
    --failed-file FIFO that nobody reads, say)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.finishing = False
        self.late = False  # a signal came while finishing

    def install(self) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._stop)

    def _stop(self, signum: int, _frame: FrameType | None) -> None:
        self.signum = signum
        if self.finishing and not self.late:
            self.late = True
            return
        raise KeyboardInterrupt  # (a second one while finishing gives the rest up)

    def finish(self) -> None:
        self.finishing = True

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum if self.signum is not None else int(signal.SIGINT))


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
    null_empty: bool = typer.Option(
        False, "--null-empty", "-Z",
        help="Send an empty value (with -K, an empty key too) as null: a tombstone (kcat's "
             "-Z). Headers are left as they are."),
    null_marker: str | None = typer.Option(
        None, "--null-marker", metavar="STR",
        help="Send a value (with -K, a key) exactly equal to STR as null, and an -H value "
             "equal to it (Kafka's console producer's null.marker; also -X null.marker=STR). "
             "Taken literally, no escapes."),
    partition: int | None = typer.Option(
        None, "--partition", "-p",
        help="Write every record to this partition (-1: the partitioner picks, as kcat's "
             "-p -1)."),
    compression: str | None = typer.Option(
        None, "--compression", "-z", show_default="none",
        help="none, gzip, snappy, lz4 or zstd (-X compression.type, compression.codec)."),
    acks: str | None = typer.Option(None, "--acks", show_default="all",
                                    help="0, 1 or all (-X acks, request.required.acks)."),
    batch_size: int | None = typer.Option(None, "--batch-size", show_default="1000000",
                                          help="Max bytes per batch (-X batch.size)."),
    linger_ms: float | None = typer.Option(
        None, "--linger-ms", show_default="5",
        help="Wait up to this long to fill a batch (-X linger.ms, queue.buffering.max.ms)."),
    sync: bool = typer.Option(False, "--sync", help="Send each record and wait for its ack."),
    partitioner: str | None = typer.Option(
        None, "--partitioner", show_default="murmur2",
        help="murmur2 (the Java client's, librdkafka's murmur2_random), crc32 (librdkafka's "
             "consistent: empty and null keys to partition 0), consistent_random "
             "(librdkafka's default, kcat's: empty and null keys spread), fnv1a, "
             "fnv1a_random, random, roundrobin, or module:function (-X partitioner, "
             "partitioner.class)."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(PROPERTY_HELP),
    command_config: Path | None = command_config_option(),
    zookeeper: str | None = typer.Option(
        None, "--zookeeper", metavar="HOST:PORT[/CHROOT]",
        help="Find the brokers in ZooKeeper's registry (/brokers/ids) and follow it; "
             "-b/--bootstrap-server is the static alternative."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or summary."),
    failed_file: Path | None = typer.Option(
        None, "--failed-file", metavar="FILE",
        help="At the end, replace FILE with the records of this run that were not "
             "acknowledged, each with its delimiter (written beside it, then renamed: "
             "empty when every record was, so a retry never resends an earlier run's). "
             "A record too long to send is streamed there as it is read, not held in "
             "memory. FILE may not be the input."),
    transactional_id: str | None = typer.Option(
        None, "--transactional-id", metavar="ID",
        help="Write in transactions (-X transactional.id): read_committed consumers see "
             "all of a transaction or none of it; on an error, Ctrl-C or SIGTERM the open "
             "one is aborted, so a pipe lands all-or-nothing. A second producer with the same ID "
             "fences this one. A transaction open longer than -X transaction.timeout.ms "
             "(here 900000, the brokers' default maximum) is aborted by the coordinator."),
    transaction_records: int | None = typer.Option(
        None, "--transaction-records", metavar="N", min=1,
        help="With --transactional-id: commit every N input records (default: one "
             "transaction for the whole input)."),
) -> None:
    """Produce records read from stdin (or --file), one per line by default."""
    from kafkactl.client.errors import ClientError
    from kafkactl.client.line_producer import LineProducer, RunOutcome
    from kafkactl.client.memory import keep_freed_memory
    from kafkactl.client.producer import Producer

    keep_freed_memory()
    # start-up's objects (modules, classes, functions: ~24,000) are never garbage: frozen,
    # the collector does not walk them again, at exit either (~25 ms of every run's exit)
    gc.freeze()

    check_topic(topic)
    partition = _partition(partition)
    marker, prop = _null_marker(null_marker, prop)
    delim, ksep, headers = _record_shape(delimiter, null_delimited, key_separator, header,
                                         marker)
    security, settings = producer_options(prop, command_config)
    kwargs = _producer_kwargs(settings, {
        "--compression": compression, "--acks": acks, "--batch-size": batch_size,
        "--linger-ms": linger_ms, "--partitioner": partitioner,
        "--transactional-id": transactional_id})
    _check_strings(kwargs, settings)
    transactional = _check_transactional(kwargs, transaction_records, failed_file)
    failed = _failed_file(failed_file, file)
    kwargs.update(bootstrap_servers=bootstrap, sync=sync, security=security)
    t0 = time.monotonic()  # the summary's time includes connecting
    discovery = None
    try:
        if zookeeper:
            from kafkactl.client.zookeeper_discovery import ZookeeperBrokerDiscovery

            if bootstrap:
                raise ValueError("give --zookeeper or -b/--bootstrap-server, not both")
            discovery = ZookeeperBrokerDiscovery(zookeeper)
            kwargs["bootstrap_servers"] = discovery.bootstrap()
        producer = Producer(**kwargs)
        if discovery is not None:
            discovery.attach(producer.client)
    except Exception as e:  # noqa: BLE001 - ZooKeeper, config and client errors alike
        if discovery is not None:
            discovery.close()
        from kafkactl.cluster.consumer_registry import ChrootError
        from kafkactl.cluster.zookeeper import ZooKeeperUnavailable

        if not isinstance(e, ValueError | ClientError | ZooKeeperUnavailable):
            raise
        # a bad option is a usage error (2); a chroot with no cluster in it is not, as for
        # consume and offsets migrate (1)
        usage = isinstance(e, ValueError) and not isinstance(e, ChrootError)
        raise fail(str(e), 2 if usage else 1) from None
    lp = LineProducer(producer, topic, partition=partition, key_separator=ksep,
                      headers=headers, keep_failed=failed is not None,
                      null_empty=null_empty, null_marker=marker)
    lp.stats.start = t0
    if not quiet:
        from kafkactl.client.outage import OutageNotices

        OutageNotices(producer, _say)
    stop = threading.Event()
    progress = None
    if not quiet and stderr_is_tty():
        progress = threading.Thread(target=_progress, args=(lp.stats, stop), daemon=True)
        progress.start()
    stop_signals = _StopSignals()
    stop_signals.install()
    blocks = lp.takes_blocks and len(delim) == 1 and not transactional
    limit = lp.limit(failed.spill if failed is not None else None)
    outcome = _run(lp, _input(file, delim, blocks, limit), transactional, transaction_records,
                   stop_signals.finish)
    # (from here on a SIGINT or SIGTERM cuts nothing short: the summary and --failed-file
    # are written whole, then the exit status is the signal's)
    code = 0
    try:
        if discovery is not None:
            discovery.close()
        stop.set()
        if progress is not None:
            progress.join(1.0)
        if not isinstance(outcome, RunOutcome):
            _report_transactions(lp, topic, quiet, outcome, stop_signals.exit_code)
        else:
            _report(lp, topic, delim, failed, quiet, outcome.interrupted, outcome.error,
                    "sent" if kwargs["acks"] == "0" else "acknowledged",
                    stop_signals.exit_code)
    except typer.Exit as e:
        code = e.exit_code
    except KeyboardInterrupt:  # a second signal while finishing
        typer.echo("error: stopped again while finishing: no summary"
                   + (f", and --failed-file {failed.path} may not hold this run's records"
                      if failed is not None else ""), err=True)
    raise typer.Exit(stop_signals.exit_code if stop_signals.late else code)


def _check_strings(kwargs: dict[str, Any], settings: ProducerSettings) -> None:
    """Exit 2 for a client.id or transactional.id that is not text (a byte the locale
    could not decode): strings in Kafka's requests, which could not be sent."""
    check_text((settings.option(name) if name in settings.given_as
                or name in settings.from_file else "--transactional-id", kwargs.get(name))
               for name in ("client_id", "transactional_id"))


def _partition(given: int | None) -> int | None:
    """-p/--partition: -1 is kcat's RD_KAFKA_PARTITION_UA, "the partitioner picks" (None);
    below it, exit 2 before anything is read."""
    if given == -1:
        return None
    if given is not None and given < 0:
        raise fail(f"-p/--partition {given}: a partition is 0 or more (-1: the "
                   "partitioner picks)", 2)
    return given


def _say(line: str) -> None:
    """A line on stderr from another thread (the sender's), above the progress line."""
    print(line, file=sys.stderr, flush=True)


def _failed_file(path: Path | None, file: Path | None) -> FailedFile | None:
    """--failed-file's FailedFile (its spill made now: exit 2 when FILE's directory cannot
    take it); exit 2 when FILE is the input itself, which a run that stops early would
    replace with the records it read and not the ones after."""
    if path is None:
        return None
    from kafkactl.cli._failed_file import FailedFile

    try:
        failed = FailedFile(path)
    except OSError as e:
        raise fail(f"--failed-file {path}: {e.strerror or e}", 2) from None
    try:
        given = os.fstat(sys.stdin.fileno()) if file is None else os.stat(file)
    except (OSError, ValueError):
        given = None
    if given is not None and failed.same_as(given):
        failed.spill.close()
        raise fail(f"--failed-file {path} is the input: a run stopped early would replace "
                   "the records it did not read; give another file (and produce from it "
                   "next time)", 2)
    return failed


def _null_marker(flag: str | None, prop: list[str]) -> tuple[bytes | None, list[str]]:
    """--null-marker, or -X null.marker (the name Kafka's console producer takes with
    --property; the last one given wins), as bytes: taken literally, as Kafka takes it (the
    bytes of the command line, whatever their encoding); and the other -X items. The flag
    and the property must agree, and the line reader's other properties are refused naming
    the option that does their work (exit 2)."""
    marker, rest = flag_or_property(
        flag, prop, NULL_MARKER_PROPERTY, "--null-marker",
        {k: f"kafkactl produce takes {v}" for k, v in READER_PROPERTIES.items()},
        "a property of Kafka's console producer's line reader")
    return (os.fsencode(marker) if marker is not None else None), rest


def _record_shape(delimiter: str, null_delimited: bool, key_separator: str | None,
                  header: list[str], null_marker: bytes | None = None,
                  ) -> tuple[bytes, bytes | None, list[tuple[str, bytes | None]]]:
    """The record delimiter, key separator and headers the options give (a header value
    equal to null_marker is null, as in Kafka's console producer); exit 2 for an empty
    delimiter or separator, a header without a key, and, as Kafka's console producer
    refuses them, a null marker equal to the key separator or to a header's key, and one
    holding the delimiter (no record could be equal to it)."""
    try:
        delim = b"\x00" if null_delimited else unescape(delimiter)
        ksep = unescape(key_separator) if key_separator is not None else None
    except typer.BadParameter as e:  # (a bad escape)
        raise fail(str(e), 2) from None
    if not delim:
        raise fail("the delimiter must not be empty", 2)
    if ksep == b"":
        raise fail("the key separator (-K/--key-separator) must not be empty", 2)
    if null_marker is not None and null_marker == ksep:
        raise fail("the null marker and the key separator (-K) may not be equal", 2)
    if null_marker is not None and delim in null_marker:
        raise fail(f"the null marker {null_marker!r} holds the record delimiter (-D) "
                   f"{delim!r}: no record can be equal to it", 2)
    headers: list[tuple[str, bytes | None]] = []
    for h in header:
        k, sep, v = h.partition("=")
        shown = _printable(h)
        if not k:
            raise fail(f"header '{shown}' must look like key=value", 2)
        if null_marker is not None and os.fsencode(k) == null_marker:
            raise fail(f"header '{shown}': a header key cannot be the null marker (a key is "
                       "never null)", 2)
        if not _is_text(k):
            raise fail(f"header '{shown}': the key is not text in this locale's encoding "
                       f"({sys.getfilesystemencoding()}); a header key is a UTF-8 string "
                       "in Kafka (the value may be any bytes)", 2)
        # (the value's bytes are the argument's, whatever the locale: os.fsencode)
        value = os.fsencode(v) if sep else None
        headers.append((k, None if value is not None and value == null_marker else value))
    return delim, ksep, headers


_is_text = is_text


_printable = printable


def _run(lp: LineProducer, chunks: Iterator[list[bytes] | LongRecord]
         | Iterator[Block | LongRecord], transactional: bool, every: int | None,
         finishing: Callable[[], None],
         ) -> RunOutcome | TransactionOutcome:
    if not transactional:
        return lp.run(chunks, finishing)
    from kafkactl.client.transactional_lines import run_in_transactions

    return run_in_transactions(lp, chunks, every,  # type: ignore[arg-type]  # lists there
                               finishing=finishing)


def _check_transactional(kwargs: dict[str, Any], transaction_records: int | None,
                         failed_file: Path | None) -> bool:
    """True for a transactional run (--transactional-id or -X transactional.id), whose
    transaction timeout defaults to TRANSACTION_TIMEOUT_MS; exit 2 for options that do not
    go with it."""
    transactional = kwargs.get("transactional_id") is not None
    if transaction_records is not None and not transactional:
        raise fail("--transaction-records goes with --transactional-id "
                   "(or -X transactional.id)", 2)
    if transactional and failed_file is not None:
        raise fail("--failed-file does not go with --transactional-id: an aborted "
                   "transaction's records are the input from the first uncommitted record "
                   "on (the error says which)", 2)
    if transactional and kwargs["acks"] != "all":
        raise fail(f"a transactional producer writes with acks=all (not {kwargs['acks']})", 2)
    if transactional:
        # a pipe may stay open long: the coordinator's default maximum, not the Java
        # client's 60 s, unless -X transaction.timeout.ms says otherwise
        kwargs.setdefault("transaction_timeout_ms", TRANSACTION_TIMEOUT_MS)
    return transactional


def _input(file: Path | None, delimiter: bytes, blocks: bool = False,
           limit: Limit | None = None,
           ) -> Iterator[list[bytes] | LongRecord] | Iterator[Block | LongRecord]:
    """The records of --file or stdin, a chunk at a time: lists of records, or with
    `blocks` delimited.Blocks, whole records left in the buffer they were read into; a
    record longer than `limit` allows, a LongRecord (opened when first read, so that an
    error opening the file is the run's error like any other)."""
    from kafkactl.client.delimited import read_blocks, read_records

    read: Callable[[IO[bytes], bytes, Limit | None], Iterator[Any]] = (
        read_blocks if blocks else read_records)
    if file is None:
        yield from read(sys.stdin.buffer, delimiter, limit)
        return
    with open(file, "rb") as stream:
        yield from read(stream, delimiter, limit)


def _cause(e: BaseException) -> str:
    """The words of an error that stopped records, without a final period (more may
    follow): a record too large with the size that was compared (as Java's "when
    serialized"), a missing topic with how to create it."""
    from kafkactl.client.errors import ClientError, UnknownTopicError
    from kafkactl.client.producer import RecordSizeError
    from kafkactl.protocol.errors import KafkaError

    if isinstance(e, RecordSizeError):
        return _too_large(e)
    if not isinstance(e, (ClientError, KafkaError, ValueError, OSError)):
        return f"{type(e).__name__}: {e} (a bug in kafkactl: please report it)"
    text = str(e).rstrip(".")
    if isinstance(e, UnknownTopicError) and text.endswith("does not exist"):
        text += " (create it with `kafkactl topics create`)"
    return text


def _too_large(e: RecordSizeError) -> str:
    """A RecordSizeError's words with the size compared with the setting: the key's and
    value's bytes and the framing the producer counts (RECORD_OVERHEAD)."""
    from kafkactl.client.producer import RECORD_OVERHEAD

    what = ("a record" if e.records == 1 else f"a batch of {e.records} records")
    return (f"{what} is {e.size + RECORD_OVERHEAD} bytes when serialized (key and value "
            f"{e.size}), larger than {e.setting} ({e.limit})")


def _report(lp: LineProducer, topic: str, delim: bytes, failed: FailedFile | None,
            quiet: bool, interrupted: bool, error: BaseException | None,
            done: str = "acknowledged", stopped: int = 130) -> None:
    """One line: the summary when every record read was acknowledged, else one `error:`
    line with how many were and were not; exit 1 on failure, `stopped` on Ctrl-C (130) or
    SIGTERM (143). `done` is what happened to a record that made it: "acknowledged", or
    "sent" with --acks 0 (the broker answers nothing: a record counts once it is written
    to the connection). --failed-file's FILE is replaced in any case (empty: none
    failed)."""
    stats = lp.stats
    unsent = lp.unsent()
    read = lp.read
    acked = stats.acked
    not_acked = read - acked
    kept_in = ""
    if failed is not None:
        try:
            failed.write(lp.failed_records() if not_acked else (), delim)
            kept_in = (f"; it is in {failed.path}" if not_acked == 1
                       else f"; all {not_acked:,} are in {failed.path}")
        except OSError as e:
            kept_in = f"; they could NOT be written to {failed.path}: {e.strerror or e}"
            if not not_acked:  # (nothing to keep, but FILE still tells an earlier run)
                typer.echo(f"error: --failed-file {failed.path} could not be emptied: "
                           f"{e.strerror or e}", err=True)
                raise typer.Exit(1) from None
    if error is None and not not_acked:
        if interrupted and read == 0:
            raise typer.Exit(stopped)  # stopped before anything was read: nothing to say
        if not quiet:
            dt = max(time.monotonic() - stats.start, 1e-6)
            typer.echo(f"{acked:,} of {read:,} records {done} "
                       f"({stats.bytes / 1e6:,.1f} MB) to {topic} in {dt:.2f} s "
                       f"({stats.sent / dt:,.0f} records/s)"
                       + (" (interrupted)" if interrupted else ""), err=True)
        if interrupted:
            raise typer.Exit(stopped)
        return
    from kafkactl.client.errors import ClosedBeforeDelivery

    cause = error or stats.first_error
    why = _cause(cause) if cause is not None else "interrupted"
    # stopped (Ctrl-C, SIGTERM) while records waited for a broker that did not answer:
    # the stop, not a failure, is what ended them (exit 130 or 143, as a stop)
    stop_only = interrupted and error is None and isinstance(stats.first_error,
                                                              ClosedBeforeDelivery)
    if stop_only:
        why = "interrupted before the broker acknowledged them"
    if read == 0:
        typer.echo(f"error: {why}", err=True)
        raise typer.Exit(1 if error is not None or not interrupted else stopped)
    line = f"error: {acked:,} of {read:,} records {done}, {not_acked:,} not"
    if unsent:
        line += f" ({len(unsent):,} read but never sent)"
    line += f": {why}"
    if failed is not None:
        line += kept_in
    else:
        line += " (--failed-file FILE keeps them)"
    if error is not None and not lp.input_done:
        line += f"; stopped reading the input after record {read:,}"
    typer.echo(line, err=True)
    raise typer.Exit(stopped if interrupted and error is None and (not stats.failed
                                                                   or stop_only) else 1)


def _report_transactions(lp: LineProducer, topic: str, quiet: bool,
                         outcome: TransactionOutcome, stopped: int = 130) -> None:
    """The summary of a transactional run: what was committed, and when it stopped early,
    what became of the open transaction (the records sent in it: aborted, left open, or a
    commit whose outcome is unknown) and the input record to resume from; exit `stopped`
    on Ctrl-C (130) or SIGTERM (143), also when an error came with it, else 1 on an
    error."""
    stats = lp.stats
    done = (f"{outcome.committed:,} records committed to {topic} in "
            f"{outcome.transactions:,} transaction{'s' if outcome.transactions != 1 else ''}")
    if outcome.error is None and not outcome.interrupted:
        if not quiet:
            dt = max(time.monotonic() - stats.start, 1e-6)
            typer.echo(f"{done} ({stats.bytes / 1e6:,.1f} MB) in {dt:.2f} s "
                       f"({outcome.committed / dt:,.0f} records/s)", err=True)
        return
    why = _cause(outcome.error) if outcome.error is not None else "interrupted"
    first = stats.first_error
    if _is_too_large(first):  # (the transaction's error quotes the record's)
        why = why.replace(str(first), _too_large(first))  # type: ignore[arg-type]
    line = f"error: {why}; " if outcome.error is not None else "interrupted: "
    txn = getattr(lp.producer, "transactions", None)
    records = sent = f"{outcome.aborted:,} record{'s' if outcome.aborted != 1 else ''}"
    unsent = (f"; {outcome.read_unsent:,} more read but never sent" if outcome.read_unsent
              else "")
    records += unsent
    resume = f"resume from input record {outcome.committed + 1:,}"
    if outcome.commit_unknown:
        line += (f"the commit of the last transaction ({sent}) was sent but not "
                 "answered: it may or may not be committed"
                 + (f" (`kafkactl transactions describe -t {_printable(txn.transactional_id)}`"
                    " says CompleteCommit if it was)" if txn is not None else "")
                 + (f" ({outcome.read_unsent:,} more read after it were never sent)"
                    if outcome.read_unsent else "")
                 + f"; {done} before it")
        resume += f" (or {outcome.committed + outcome.aborted + 1:,} if it was committed)"
    elif outcome.aborted or outcome.read_unsent or outcome.abort_error is not None:
        if outcome.abort_error is None or _fenced(outcome.abort_error):
            line += f"the open transaction ({records}) was aborted"
        elif outcome.abort_unanswered:
            line += (f"the abort of the open transaction ({records}) was not answered "
                     f"({_cause(outcome.abort_error)}): its coordinator may yet abort it, "
                     "else it does when transaction.timeout.ms passes" + _left_open(txn))
        else:
            line += (f"the open transaction ({records}) was not aborted "
                     f"({_cause(outcome.abort_error)}): its coordinator aborts it when "
                     "transaction.timeout.ms passes" + _left_open(txn))
        line += f"; {done}"
    else:
        line += done
    if outcome.committed or outcome.commit_unknown:
        line += f"; {resume}"
    typer.echo(line, err=True)
    raise typer.Exit(stopped if outcome.interrupted else 1)


def _left_open(txn: Any) -> str:
    """How long a transaction left open holds read_committed consumers back, and how to end
    it sooner: a producer of its transactional.id aborts it when it starts
    (InitProducerId)."""
    if txn is None:
        return ""
    tid = _printable(txn.transactional_id)
    return (f" ({txn.transaction_timeout_ms:,} ms), holding read_committed consumers of "
            f"its partitions back until then; to end it sooner, start a producer of "
            f"transactional.id '{tid}' (`kafkactl produce --transactional-id {tid}` aborts "
            "it as it starts)")


def _is_too_large(error: BaseException | None) -> bool:
    from kafkactl.client.producer import RecordSizeError

    return isinstance(error, RecordSizeError)


def _fenced(error: BaseException) -> bool:
    """The producer was fenced: the producer that took over aborted its transaction."""
    from kafkactl.client.transaction_manager import ProducerFencedError

    return isinstance(error, ProducerFencedError)


def register(app: typer.Typer) -> None:
    app.command("produce")(produce)
