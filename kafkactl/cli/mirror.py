"""`kafkactl mirror`: copy topics from a source cluster into a target cluster, losing
nothing (kafkactl.mirror does the work; this module parses options, shows the status and
maps the outcome to an exit status: 0 after SIGTERM/Ctrl-C, 1 on failure, 2 on bad input)."""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import (
    client_properties,
    command_config_option,
    fail,
    parse_key_values,
    property_option,
    stderr_is_tty,
)

if TYPE_CHECKING:  # the library loads when the command runs, so --help stays fast
    from rich.table import Table

    from kafkactl.mirror import MirrorConfig, MirrorMaker, MirrorStatus, MirrorWorkers

    Mirror = MirrorMaker | MirrorWorkers


def mirror(
    source: str | None = typer.Option(
        None, "--source", metavar="HOST:PORT[,...]",
        help="Bootstrap servers of the cluster to copy from (or bootstrap.servers in "
             "--consumer.config)."),
    target: str | None = typer.Option(
        None, "--target", metavar="HOST:PORT[,...]",
        help="Bootstrap servers of the cluster to copy into (or bootstrap.servers in "
             "--producer.config)."),
    whitelist: str | None = typer.Option(
        None, "--whitelist", metavar="REGEX",
        help="Mirror every topic whose whole name matches (new ones too, while running); "
             "a comma separates alternatives, as in MirrorMaker (a,b is a|b)."),
    topic: list[str] = typer.Option([], "--topic", "-t", help="A topic to mirror (repeatable)."),
    blacklist: str | None = typer.Option(
        None, "--blacklist", metavar="REGEX",
        help="Skip topics whose whole name matches (commas as in --whitelist)."),
    group: str | None = typer.Option(
        None, "--group", "-G",
        help="Consumer group in the source: mirrors in one group share the partitions and "
             "take over from each other (default: group.id in --consumer.config, else "
             "kafkactl-mirror)."),
    num_streams: str = typer.Option(
        "1", "--num-streams", metavar="N|auto",
        help="Group members; above 1, each is a worker process of its own (auto: one per "
             "CPU, at most 4)."),
    source_zookeeper: str | None = typer.Option(
        None, "--source-zookeeper", metavar="HOST:PORT[/CHROOT]",
        help="Find the source brokers in this ZooKeeper (/brokers/ids) instead of --source."),
    consumer_property: list[str] = typer.Option(
        [], "--consumer-property", metavar="K=V",
        help="Source consumer property, e.g. auto.offset.reset=latest (repeatable)."),
    producer_property: list[str] = typer.Option(
        [], "--producer-property", metavar="K=V",
        help="Target producer property, e.g. compression.type=lz4 (repeatable)."),
    consumer_config: Path | None = typer.Option(
        None, "--consumer.config", metavar="FILE", exists=True, dir_okay=False,
        help="Source consumer properties file (MirrorMaker's flag), security ones too; "
             "--consumer-property overrides it."),
    producer_config: Path | None = typer.Option(
        None, "--producer.config", metavar="FILE", exists=True, dir_okay=False,
        help="Target producer properties file (MirrorMaker's flag), security ones too; "
             "--producer-property overrides it."),
    prop: list[str] = property_option(
        "Client security property key=value for both clusters, librdkafka's names "
        "(repeatable); the consumer and producer properties override it per cluster."),
    command_config: Path | None = command_config_option(),
    abort_on_send_failure: bool = typer.Option(
        True, "--abort-on-send-failure/--no-abort-on-send-failure",
        help="Stop at a record the target refuses (default), or skip and count it."),
    rename: list[str] = typer.Option([], "--rename", metavar="SRC:DST",
                                     help="Write source topic SRC into target topic DST."),
    copy_topic_configs: bool = typer.Option(
        False, "--copy-topic-configs",
        help="Create missing target topics with the source topic's configs."),
    json_status: Path | None = typer.Option(
        None, "--json-status", metavar="FILE",
        help="Keep FILE replaced with the status as JSON, for monitoring."),
    wait: bool = typer.Option(False, "--wait",
                              help="Wait for unreachable clusters at start instead of exiting."),
    status_interval: float = typer.Option(1.0, "--status-interval", metavar="SECONDS",
                                          help="How often the status is refreshed."),
    topic_refresh_ms: int = typer.Option(
        5000, "--topic-refresh-ms", help="How often new source topics are looked for."),
    commit_interval_ms: int = typer.Option(
        1000, "--commit-interval-ms", help="How often acknowledged offsets are committed."),
    exactly_once: bool = typer.Option(
        False, "--exactly-once",
        help="Copy in transactions that also commit the consumed source offsets (KIP-447): "
             "a killed mirror neither loses nor duplicates records, as read_committed "
             "consumers of the target see them. The offsets are the group's in the TARGET "
             "cluster (a transaction spans one cluster); the source group only assigns "
             "partitions. Each stream's transactional.id is GROUP-mirror-N "
             "(--producer-property transactional.id=PREFIX for PREFIX-N); the source is "
             "read with read_committed; transactions commit every --commit-interval-ms."),
    quiet: bool = typer.Option(False, "--quiet", "-q",
                               help="No live status and no summary on stderr."),
) -> None:
    """Copy topics from a source cluster into a target cluster as a consumer group,
    committing source offsets only for records the target acknowledged."""
    from kafkactl.mirror import MirrorConfig, MirrorConfigError, parse_num_streams, parse_renames
    from kafkactl.mirror.config import DEFAULT_GROUP

    both = client_properties(prop, command_config)
    consumer_file = _read_config(consumer_config, "--consumer.config")
    producer_file = _read_config(producer_config, "--producer.config")
    # what Kafka's MirrorMaker reads from its files, unless given as options
    file_source = consumer_file.pop("bootstrap.servers", None)
    file_target = producer_file.pop("bootstrap.servers", None)
    file_group = consumer_file.pop("group.id", None)
    try:
        consumer_props = {**both, **consumer_file,
                          **parse_key_values(consumer_property, "--consumer-property")}
        producer_props = {**both, **producer_file,
                          **parse_key_values(producer_property, "--producer-property")}
    except typer.BadParameter as e:
        raise fail(str(e), 2) from None
    if source is None and source_zookeeper is None:
        source = file_source
    target = target or file_target
    if target is None:
        raise fail("give --target BOOTSTRAP (or bootstrap.servers in --producer.config)", 2)
    if source is None and source_zookeeper is None:
        raise fail("give --source BOOTSTRAP or --source-zookeeper HOST:PORT", 2)
    if source is not None and source_zookeeper is not None:
        raise fail("--source and --source-zookeeper are mutually exclusive", 2)
    if status_interval <= 0:
        raise fail("--status-interval must be positive", 2)
    try:
        config = MirrorConfig(
            source=source or "", target=target, topics=tuple(topic), whitelist=whitelist,
            blacklist=blacklist,
            group=group if group is not None else file_group or DEFAULT_GROUP,
            num_streams=parse_num_streams(num_streams), consumer_properties=consumer_props,
            producer_properties=producer_props,
            abort_on_send_failure=abort_on_send_failure, renames=parse_renames(rename),
            copy_topic_configs=copy_topic_configs, topic_refresh_ms=topic_refresh_ms,
            commit_interval_ms=commit_interval_ms, exactly_once=exactly_once)
        config.validate()
    except MirrorConfigError as e:
        raise fail(str(e), 2) from None
    if json_status is not None:
        _check_status_path(json_status)
    if source_zookeeper is not None:
        config.source = _discover_source(source_zookeeper)
    _log_warnings()
    raise typer.Exit(_run(config, json_status, wait, status_interval, quiet))


def _read_config(path: Path | None, option: str) -> dict[str, str]:
    """A Java properties file (MirrorMaker's --consumer.config / --producer.config)."""
    from kafkactl.protocol.properties import parse_properties

    if path is None:
        return {}
    try:
        return parse_properties(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise fail(f"{option} {path}: {getattr(e, 'strerror', None) or e}", 2) from None


def _check_status_path(path: Path) -> None:
    """--json-status must be a file the mirror can replace (write_status_file renames a
    file written next to it over it): a mistyped directory is an error now (exit 2), not
    one line per status interval of a mirror that runs on without its status."""
    import tempfile

    if path.is_dir():
        raise fail(f"--json-status {path} is a directory", 2)
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp"):
            pass
    except OSError as e:
        raise fail(f"--json-status {path}: cannot write in {path.parent}: "
                   f"{e.strerror or e}", 2) from None


def _log_warnings() -> None:
    """The library's warnings (retries, skipped records) as `warning: ...` lines."""
    from kafkactl.mirror.worker import log_warnings

    log_warnings()


def _discover_source(connect: str) -> str:
    """The source's bootstrap list from the brokers registered in ZooKeeper (the chroot
    must exist and hold /brokers: nothing is created there), or an error naming
    --source-zookeeper (exit 1)."""
    from kazoo.exceptions import KazooException

    from kafkactl.client.errors import NoBrokersAvailable
    from kafkactl.client.zookeeper_discovery import discover_bootstrap
    from kafkactl.cluster import zk_paths
    from kafkactl.cluster.consumer_registry import connect_existing
    from kafkactl.cluster.zookeeper import ZooKeeperUnavailable, close

    try:
        zk = connect_existing(connect, require=zk_paths.BROKERS, what="--source-zookeeper")
    except (ZooKeeperUnavailable, ValueError) as e:
        raise fail(str(e)) from None
    except KazooException as e:  # (lost again right after connecting)
        raise fail(f"ZooKeeper at {connect} (--source-zookeeper, {type(e).__name__}): it "
                   "did not answer after the connection was made") from None
    try:
        return discover_bootstrap(zk, connect)
    except NoBrokersAvailable as e:
        raise fail(f"--source-zookeeper: {e}") from None
    except KazooException as e:
        raise fail(f"ZooKeeper at {connect} (--source-zookeeper, {type(e).__name__}): "
                   "reading /brokers/ids failed") from None
    finally:
        close(zk)


def _run(config: MirrorConfig, json_status: Path | None, wait: bool, interval: float,
         quiet: bool) -> int:
    from kafkactl.client.errors import ClientError
    from kafkactl.mirror import MirrorConfigError
    from kafkactl.mirror.maker import ClusterUnreachable
    from kafkactl.mirror.worker import mirror_advice
    from kafkactl.protocol.errors import KafkaError

    stop_requested = False

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stop_requested
        stop_requested = True
        if maker is not None:
            maker.stop()

    maker: Mirror | None = None
    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        maker = _start(config, wait, interval, lambda: stop_requested)
        if maker is None:
            return 0  # stopped while waiting for a cluster
        if stop_requested:
            maker.stop()
        _follow(maker, json_status, interval, quiet)
        maker.close()
        final = maker.status()
        if json_status is not None:
            _write_status(json_status, final)
        if not quiet:
            typer.echo(f"mirrored {final.mirrored} records ({final.skipped} skipped) of "
                       f"{len(final.topics)} topic(s)", err=True)
        if final.error is not None:
            typer.echo(f"error: {mirror_advice(final.error)}", err=True)
            return 1
        return 0
    except ClusterUnreachable as e:
        typer.echo(f"error: {e}", err=True)
        return 1
    except MirrorConfigError as e:  # MirrorLoopError: a topic copied onto itself
        typer.echo(f"error: {e}", err=True)
        return 2
    except (ClientError, KafkaError, OSError, ValueError) as e:
        typer.echo(f"error: {mirror_advice(str(e))}", err=True)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        if maker is not None:
            with contextlib.suppress(Exception):
                maker.close()


def _start(config: MirrorConfig, wait: bool, interval: float,
           stop_requested: Any) -> Mirror | None:
    """A started mirror (MirrorMaker, or MirrorWorkers for --num-streams above 1); with
    --wait, retries until both clusters answer."""
    from kafkactl.mirror import new_mirror
    from kafkactl.mirror.maker import ClusterUnreachable

    told = False
    while True:
        maker = new_mirror(config, interval)
        try:
            maker.start()
            return maker
        except ClusterUnreachable as e:
            maker.close()
            if not wait:
                raise
            if not told:
                typer.echo(f"waiting: {e}", err=True)
                told = True
        for _ in range(10):
            if stop_requested():
                return None
            time.sleep(0.1)


def _follow(maker: Mirror, json_status: Path | None, interval: float,
            quiet: bool) -> None:
    """Refresh the status (live table on a terminal, --json-status file) until stopped;
    Ctrl-C stops the mirror the way SIGTERM does."""
    live: Any = None
    if not quiet and stderr_is_tty():
        from rich.console import Console
        from rich.live import Live

        live = Live(console=Console(stderr=True), refresh_per_second=4, transient=False)
        live.start()
    try:
        while True:
            try:
                done = maker.wait(interval)
            except KeyboardInterrupt:
                maker.stop()
                continue
            status = maker.status()
            if json_status is not None:
                _write_status(json_status, status)
            if live is not None:
                live.update(_table(status))
            if done:
                return
    finally:
        if live is not None:
            live.stop()


def _write_status(path: Path, status: MirrorStatus) -> None:
    from kafkactl.mirror.status import write_status_file

    try:
        write_status_file(path, status)
    except OSError as e:
        typer.echo(f"error: cannot write --json-status {path}: {e}", err=True)


def _table(status: MirrorStatus) -> Table:
    from rich.table import Table

    table = Table(title=f"mirror {status.source} → {status.target} (group {status.group}, "
                        f"{status.state})", title_justify="left")
    for name in ("topic", "target", "partitions", "records/s", "lag", "mirrored", "skipped"):
        table.add_column(name, justify="left" if name in ("topic", "target") else "right")
    for t in status.topics.values():
        table.add_row(t.topic, t.target_topic, str(t.partitions), f"{t.records_per_sec:,.0f}",
                      "-" if t.lag is None else f"{t.lag:,}", f"{t.mirrored:,}",
                      f"{t.skipped:,}")
    table.add_row("total", "", "", f"{status.records_per_sec:,.0f}",
                  "-" if status.lag is None else f"{status.lag:,}", f"{status.mirrored:,}",
                  f"{status.skipped:,}", style="bold")
    return table


def register(app: typer.Typer) -> None:
    app.command("mirror")(mirror)
