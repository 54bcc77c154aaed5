"""`kafkactl rebalance --partitions` and `--preferred-leaders`: spread replicas evenly over
the live brokers (after brokers were added or removed), and give leadership back to each
partition's preferred replica. The replicas move as Kafka moves them: the new ones copy the
data as followers, and the old ones are dropped only once the new ones are in sync."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import fail
from kafkactl.cli._output import print_table

if TYPE_CHECKING:
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.cluster import ClusterMetadata

TopicPartition = tuple[str, int]


def even_plan(cluster: ClusterMetadata, topics: list[str]) -> dict[TopicPartition, list[int]]:
    """partition -> replicas spread evenly over the live brokers (same replication factor),
    for the partitions whose replicas would change."""
    from kafkactl.cluster.assignment import assign_replicas

    brokers = sorted(cluster.brokers)
    plan: dict[TopicPartition, list[int]] = {}
    for i, name in enumerate(sorted(topics)):
        t = cluster.topics.get(name)
        if t is None or not t.partitions:
            continue
        rf = min(max(len(p.replicas) for p in t.partitions.values()), len(brokers))
        target = assign_replicas(brokers, len(t.partitions), rf, start_index=i % len(brokers))
        for p, part in t.partitions.items():
            if list(part.replicas) != target[p]:
                plan[(name, p)] = target[p]
    return plan


def _topics(cluster: ClusterMetadata, wanted: list[str]) -> list[str]:
    if wanted:
        missing = [t for t in wanted if t not in cluster.topics]
        if missing:
            raise ValueError(f"unknown topic(s): {', '.join(missing)}")
        return wanted
    return [t for t, m in cluster.topics.items() if not m.is_internal]


def rebalance_partitions(bootstrap: str | None, topics: list[str], *, execute: bool,
                         as_json: bool, timeout: float, security: Any = None) -> None:
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    try:
        with AdminClient(bootstrap, client_id="kafkactl-rebalance",
                         security=security) as admin:
            cluster = admin.client.refresh_metadata(None)
            plan = even_plan(cluster, _topics(cluster, topics))
            current = {tp: list(cluster.topics[tp[0]].partitions[tp[1]].replicas)
                       for tp in plan}
            errors: dict[str, str] = {}
            if execute and plan:
                results = admin.alter_partition_reassignments(plan)
                errors = {f"{t}-{p}": str(e) for (t, p), e in results.items() if e}
                _wait(admin, set(plan) - {tp for tp, e in results.items() if e}, timeout,
                      quiet=as_json)
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None
    rows: list[dict[str, Any]] = [
        {"partition": f"{t}-{p}", "current": current[(t, p)], "target": target}
        for (t, p), target in sorted(plan.items())]
    if as_json:
        typer.echo(json.dumps({"executed": execute, "moves": rows, "errors": errors},
                              indent=1))
    elif not rows:
        typer.echo("Nothing to move: every partition's replicas are spread evenly over the "
                   "live brokers already.")
    else:
        from rich.table import Table

        table = Table("PARTITION", "CURRENT REPLICAS", "TARGET REPLICAS",
                      title=f"{len(rows)} partition(s) to move")
        for r in rows:
            table.add_row(str(r["partition"]), ",".join(map(str, r["current"])),
                          ",".join(map(str, r["target"])))
        print_table(table)
        if not execute:
            typer.echo("Dry run: nothing moved (add --execute).", err=True)
    for name, why in errors.items():
        typer.echo(f"error: {name}: {why}", err=True)
    if errors:
        raise typer.Exit(1)


def _wait(admin: AdminClient, moving: set[TopicPartition], timeout: float, *,
          quiet: bool) -> None:
    """Until the moves are done, showing how many are (progress on stderr)."""
    deadline = time.monotonic() + timeout
    total = len(moving)
    while moving:
        ongoing = set(admin.list_partition_reassignments())
        moving &= ongoing
        if not quiet:
            typer.echo(f"\r{total - len(moving)} of {total} partition(s) moved", err=True,
                       nl=not moving)
        if not moving:
            return
        if time.monotonic() >= deadline:
            raise ValueError(f"{len(moving)} move(s) still in progress after {timeout:g} s "
                             "(they go on; see again with --partitions)")
        time.sleep(0.5)


def preferred_leaders(bootstrap: str | None, topics: list[str], *, as_json: bool,
                      security: Any = None) -> None:
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import ErrorCode, KafkaError

    try:
        with AdminClient(bootstrap, client_id="kafkactl-rebalance",
                         security=security) as admin:
            cluster = admin.client.refresh_metadata(None)
            names = _topics(cluster, topics)
            wanted = [(t, p) for t in names for p in cluster.topics[t].partitions]
            results = admin.elect_preferred_leaders(wanted)
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None
    rows: list[dict[str, Any]] = []
    failed = False
    for (t, p), err in sorted(results.items()):
        code = ErrorCode.NONE if err is None else err.code
        failed |= code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)
        rows.append({"partition": f"{t}-{p}", "result": (
            "moved" if code == ErrorCode.NONE else "already preferred"
            if code == ErrorCode.ELECTION_NOT_NEEDED else f"{code.name}: {err}")})
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
    else:
        moved = sum(r["result"] == "moved" for r in rows)
        typer.echo(f"Preferred leader election: {moved} partition(s) moved, "
                   f"{len(rows) - moved} unchanged.")
        for r in rows:
            if r["result"] not in ("moved", "already preferred"):
                typer.echo(f"error: {r['partition']}: {r['result']}", err=True)
    if failed:
        raise typer.Exit(1)
