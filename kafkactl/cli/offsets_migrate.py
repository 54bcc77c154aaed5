"""`kafkactl offsets migrate`: consumer offsets from ZooKeeper (/consumers/GROUP/offsets)
into the broker's offset manager, verified by reading them back (seed 002's migration).
The work is kafkactl.client.offsets_migrate; this module parses and renders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    client_security,
    command_config_option,
    fail,
    property_option,
)
from kafkactl.cli._output import print_table

if TYPE_CHECKING:
    from kafkactl.client.offsets_migrate import GroupResult


def migrate(
    zookeeper: str = typer.Option(..., "--zookeeper", metavar="HOST:PORT[/CHROOT]",
                                  help="The ZooKeeper the groups committed to."),
    group: list[str] = typer.Option([], "--group", "-G", "-g",
                                    help="A group to migrate (repeatable)."),
    all_groups: bool = typer.Option(False, "--all-groups",
                                    help="Every group under /consumers."),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="Show what would move; write nothing anywhere."),
    overwrite: bool = typer.Option(
        False, "--overwrite",
        help="ZooKeeper's offsets win: also replace newer offsets the broker holds "
             "(rewinding the group; without it a newer broker offset is kept and counts "
             "as migrated, as Kafka resumes from the larger) and take offsets past the log "
             "end or before the log start."),
    delete_source: bool = typer.Option(
        False, "--delete-source",
        help="After every partition of a group verified, delete its ZooKeeper offsets."),
    skip_deleted_topics: bool = typer.Option(
        False, "--skip-deleted-topics",
        help="Offsets of a topic the broker does not have (deleted since: Kafka left its "
             "ZooKeeper offsets) count as done, not migrated; not when the broker has no "
             "topic of the group at all."),
    zookeeper_timeout: float = typer.Option(
        30.0, "--zookeeper-timeout", metavar="SECONDS", min=0.1,
        help="How long ZooKeeper may not answer a request (retried across lost "
             "connections), or take to connect, before the run stops, saying how far it "
             "got; default 30."),
    as_json: bool = typer.Option(False, "--json", help="JSON output."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Move consumer offsets from ZooKeeper into the broker and verify them."""
    from kafkactl.client import offsets_migrate as migration
    from kafkactl.client.consumer import SimpleConsumer
    from kafkactl.client.errors import ClientError
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.cluster import zk_paths
    from kafkactl.cluster import zookeeper as zkconn
    from kafkactl.protocol.errors import KafkaError

    if bool(group) == all_groups:
        raise fail("give -G/--group (repeatable) or --all-groups", 2)
    if dry_run and delete_source:
        raise fail("--dry-run deletes nothing: drop --delete-source or --dry-run", 2)
    security = client_security(prop, command_config)
    zk = connect_existing_chroot(zookeeper, require=zk_paths.CONSUMERS,
                                 timeout_s=zookeeper_timeout)
    stopped: str | None = None
    zookeeper_stalled = False
    try:
        simple = SimpleConsumer(bootstrap, client_id="kafkactl-offsets-migrate",
                                security=security)
        try:
            # each group is printed as soon as it is done: a long run that stops still
            # says what it did (JSON: one document, at the end)
            results = migration.migrate(
                zk, GroupAdmin(simple.client), simple,
                None if all_groups else list(dict.fromkeys(group)),
                dry_run=dry_run, overwrite=overwrite, delete_source=delete_source,
                skip_deleted_topics=skip_deleted_topics,
                on_result=None if as_json else lambda r: _render_now(r, dry_run),
                zookeeper_timeout_s=zookeeper_timeout,
                zookeeper_name=f"ZooKeeper at {zookeeper}")
        except migration.MigrationStopped as e:
            results, stopped, zookeeper_stalled = e.done, str(e), e.zookeeper
        finally:
            simple.close()
    except (ClientError, KafkaError) as e:
        raise fail(str(e)) from None
    finally:
        if zookeeper_stalled:  # (a graceful close would wait for the server too)
            _close_within(zk, 1.0)
        else:
            zkconn.close(zk)
    if as_json:
        doc: dict[str, Any] = {"dry_run": dry_run, "groups": [_doc(r) for r in results]}
        if stopped is not None:
            doc["error"] = stopped
        typer.echo(json.dumps(doc, indent=1))
    if stopped is not None:
        raise fail(stopped)
    if not all(r.error is None and all(row.ok for row in r.rows) for r in results):
        raise typer.Exit(1)


def connect_existing_chroot(zookeeper: str, require: str | None = None,
                            timeout_s: float | None = None) -> Any:
    """A kazoo client for a `--zookeeper` option whose chroot exists (a mistyped one is not
    created) and has `require` under it (consumer_registry.connect_existing), connected
    within `timeout_s` (default: connect_existing's), or a one-line error (exit 1)."""
    from kazoo.exceptions import KazooException

    from kafkactl.cluster import consumer_registry
    from kafkactl.cluster.zookeeper import ZooKeeperUnavailable

    try:
        if timeout_s is None:
            return consumer_registry.connect_existing(zookeeper, require=require)
        return consumer_registry.connect_existing(zookeeper, require=require,
                                                  timeout_s=timeout_s)
    except (ZooKeeperUnavailable, ValueError) as e:
        raise fail(str(e)) from None
    except KazooException as e:  # (lost again right after connecting)
        raise fail(f"ZooKeeper at {zookeeper} ({type(e).__name__}): it did not answer "
                   "after the connection was made") from None


def _close_within(zk: Any, seconds: float) -> None:
    """Close the kazoo client, waiting at most `seconds`: a server that stopped answering
    would hold a graceful close for its connect timeout (kazoo's threads are daemons)."""
    import threading

    from kafkactl.cluster import zookeeper as zkconn

    closing = threading.Thread(target=zkconn.close, args=(zk,), daemon=True)
    closing.start()
    closing.join(seconds)


def _none_if_negative(offset: int) -> int | None:
    return None if offset < 0 else offset


def _doc(r: GroupResult) -> dict[str, Any]:
    return {"group": r.group, "error": r.error, "warning": r.warning, "partitions": [
        {"topic": x.topic, "partition": x.partition, "znode": x.path,
         "zookeeper": x.zookeeper, "broker_before": _none_if_negative(x.broker_before),
         "broker_after": _none_if_negative(x.broker_after),
         "status": x.status, "note": x.note, "deleted_from_zookeeper": x.deleted}
        for x in r.rows]}


def _render_now(result: GroupResult, dry_run: bool) -> None:
    """One group's report, out at once (not left in a buffer)."""
    from kafkactl.cli._output import StdoutClosed, flush_stdout

    _render([result], dry_run)
    if not flush_stdout():
        raise StdoutClosed


def _cell(text: str) -> str:
    """`text` for a table cell: quoted and escaped (repr) when it would not show as it is
    (a newline, which breaks the row, other control characters, blanks at an end, or
    nothing at all), and never read as rich markup."""
    from rich.markup import escape

    plain = text != "" and text.isprintable() and text.strip() == text
    return escape(text if plain else repr(text))


def _render(results: list[GroupResult], dry_run: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    for r in results:
        title = f"group {r.group}" + (" (dry run: nothing written)" if dry_run else "")
        table = Table("TOPIC", "PARTITION", "ZOOKEEPER", "BROKER BEFORE", "BROKER AFTER",
                      "STATUS", "NOTE", title=title, box=None)
        for x in r.rows:
            table.add_row(escape(x.topic),
                          escape(repr(x.name)) if x.partition is None else str(x.partition),
                          _cell(x.zookeeper),
                          "-" if x.broker_before < 0 else str(x.broker_before),
                          "-" if x.broker_after < 0 else str(x.broker_after),
                          x.status + (" (source deleted)" if x.deleted else ""),
                          escape(x.note))
        if r.rows:
            print_table(table)
        counts: dict[str, int] = {}
        for x in r.rows:
            counts[x.status] = counts.get(x.status, 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        nothing = "nothing to migrate" + (f" ({r.note})" if r.note else "")
        if summary or not r.error:  # (a group that is not there: its error alone)
            typer.echo(f"group {r.group}: {summary or nothing}")
        if r.warning:
            typer.echo(f"warning: group {r.group}: {r.warning}", err=True)
        if r.error:
            typer.echo(f"error: group {r.group}: {r.error}", err=True)
