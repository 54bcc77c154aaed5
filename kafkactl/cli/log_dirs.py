"""`kafkactl log-dirs describe|move`: what each broker's log dirs hold (kafka-log-dirs.sh
--describe, DescribeLogDirs) and moving a replica to another log dir of its broker
(AlterReplicaLogDirs, what kafka-reassign-partitions does with "log_dirs")."""

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

log_dirs_app = typer.Typer(
    help="Describe brokers' log dirs and move replicas between the log dirs of a broker.",
    no_args_is_help=True)


def _client(bootstrap: str | None, prop: list[str], command_config: Path | None) -> Any:
    from kafkactl.client.kafka_client import KafkaClient

    return KafkaClient(bootstrap, client_id="kafkactl-log-dirs",
                       security=client_security(prop, command_config))


def _topics(topic: list[str]) -> dict[str, list[int]] | None:
    return {t: [] for t in topic} if topic else None


@log_dirs_app.command("describe")
def describe(
    topic: list[str] = typer.Option([], "--topic", "-t",
                                    help="Only the replicas of this topic (repeatable)."),
    broker: list[int] = typer.Option([], "--broker", help="Only this broker (repeatable; "
                                     "default: every broker)."),
    as_json: bool = typer.Option(False, "--json", help="JSON output."),
    bootstrap: str | None = bootstrap_option(), prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Each broker's log dirs: the replicas in each, their size and lag; a replica being
    moved into a dir shows as future."""
    from kafkactl.client import log_dirs_admin as admin
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    client = _client(bootstrap, prop, command_config)
    try:
        dirs = []
        for b in broker or admin.brokers(client):
            dirs += admin.describe(client, b, _topics(topic))
    except (ClientError, KafkaError, OSError) as e:
        raise fail(str(e)) from None
    finally:
        client.close()
    if as_json:
        write_line(json.dumps([{
            "broker": d.broker, "log_dir": d.path, "error": d.error,
            "total_bytes": d.total_bytes, "usable_bytes": d.usable_bytes,
            "replicas": [{"topic": r.topic, "partition": r.partition, "size": r.size,
                          "offset_lag": r.offset_lag, "future": r.future}
                         for r in sorted(d.replicas, key=lambda r: (r.topic, r.partition))]}
            for d in dirs]))
        return
    from rich.table import Table

    table = Table("BROKER", "LOG DIR", "FREE", "TOTAL", "TOPIC", "PARTITION", "SIZE", "LAG",
                  "", box=None)
    for d in dirs:
        space = (_space(d.usable_bytes), _space(d.total_bytes))
        if d.error or not d.replicas:
            table.add_row(str(d.broker), d.path, *space, "-", "-", "-", "-", d.error or "")
        for r in sorted(d.replicas, key=lambda r: (r.topic, r.partition)):
            table.add_row(str(d.broker), d.path, *space, r.topic, str(r.partition),
                          f"{r.size:,}", str(r.offset_lag), "future" if r.future else "")
    print_table(table)


def _space(n: int | None) -> str:
    """A log dir's free or total space (DescribeLogDirs v4+), as df -h shows it; "-" when
    the broker does not say (-1, an older version)."""
    if n is None or n < 0:
        return "-"
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"


@log_dirs_app.command("move")
def move(
    topic: str = typer.Option(..., "--topic", "-t", help="The topic."),
    partition: list[int] = typer.Option([], "--partition", "-p",
                                        help="A partition (repeatable; default: every "
                                             "partition the broker holds)."),
    log_dir: str = typer.Option(..., "--dir", metavar="PATH",
                                help="The destination: one of the broker's log dirs (as "
                                     "`log-dirs describe` shows it)."),
    broker: int = typer.Option(..., "--broker", help="The broker whose replicas move."),
    wait: bool = typer.Option(False, "--wait", help="Wait until every move is done."),
    timeout_s: float = typer.Option(300.0, "--timeout", metavar="SECONDS",
                                    help="With --wait: give up after this long."),
    bootstrap: str | None = bootstrap_option(), prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Move replicas of a topic to another log dir of their broker. The broker copies each
    replica while it keeps serving, then swaps it in; `log-dirs describe` shows the copy
    as future until then."""
    from kafkactl.client import log_dirs_admin as admin
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    client = _client(bootstrap, prop, command_config)
    try:
        parts = list(partition)
        if not parts:
            held = admin.describe(client, broker, {topic: []})
            parts = sorted({r.partition for d in held for r in d.replicas
                            if r.topic == topic and not r.future})
            if not parts:
                raise fail(f"broker {broker} holds no replica of {topic}")
        errors = admin.move(client, broker, log_dir, {topic: parts})
        failed = {tp: e for tp, e in errors.items() if e is not None}
        for (t, p), e in sorted(failed.items()):
            typer.echo(f"error: {t}-{p} on broker {broker}: {e}", err=True)
        started = sorted(p for (_t, p), e in errors.items() if e is None)
        if started:
            write_line(f"Moving {topic} partition(s) {', '.join(map(str, started))} on "
                       f"broker {broker} to {log_dir}.")
        if wait and started:
            _wait(client, broker, topic, started, log_dir, timeout_s)
            write_line("Done.")
    except (ClientError, KafkaError, OSError) as e:
        raise fail(str(e)) from None
    finally:
        client.close()
    if failed:
        raise typer.Exit(1)


def _wait(client: Any, broker: int, topic: str, parts: list[int], log_dir: str,
          timeout_s: float) -> None:
    """Until every partition is in `log_dir` and no future copy remains."""
    from kafkactl.client import log_dirs_admin as admin

    deadline = time.monotonic() + timeout_s
    want = Path(log_dir).resolve()
    while True:
        dirs = admin.describe(client, broker, {topic: parts})
        where = {(r.partition, r.future): Path(d.path).resolve()
                 for d in dirs for r in d.replicas}
        if all(where.get((p, False)) == want and (p, True) not in where for p in parts):
            return
        if time.monotonic() >= deadline:
            raise fail(f"the move did not finish within {timeout_s:g} s (it goes on; "
                       "`kafkactl log-dirs describe` shows it)")
        time.sleep(0.2)


def register(app: typer.Typer) -> None:
    app.add_typer(log_dirs_app, name="log-dirs")
