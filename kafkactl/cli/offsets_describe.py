"""`kafkactl offsets show --state` and `--members [--verbose]`: a group as
kafka-consumer-groups --describe --state / --members shows it (one line per group:
coordinator, assignment strategy, state, member count; or one line per member: its id,
host, client id, partition count and, verbose, its assignment)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import fail

if TYPE_CHECKING:
    from kafkactl.client.consumer import SimpleConsumer
    from kafkactl.client.group.group_admin import GroupAdmin, GroupDescription

RowsOf = Callable[["GroupAdmin", "SimpleConsumer", str], list[dict[str, Any]]]


def rows_of(*, state: bool, members: bool, verbose: bool, offsets: RowsOf) -> RowsOf:
    """What `offsets show` collects per group: --state's row, --members' rows, or (neither)
    `offsets`, the partitions' rows; a usage error for --state with --members, or
    --verbose without --members."""
    if state and members:
        raise fail("give only one of --state and --members", 2)
    if verbose and not members:
        raise fail("--verbose: only with --members", 2)
    if state:
        return lambda admin, _simple, group: state_rows(admin, group)
    if members:
        return lambda admin, _simple, group: member_rows(admin, group)

    def offsets_rows(admin: GroupAdmin, simple: SimpleConsumer,
                     group: str) -> list[dict[str, Any]]:
        rows = offsets(admin, simple, group)
        # the partitions' view says an Empty or rebalancing group too, as kafka-consumer-
        # groups --describe does before its table (printOffsets, shouldPrintMemberState)
        states = {r["state"] for r in rows if r.get("state")}
        if len(states) == 1:
            state_note(group, states.pop())
        return rows

    return offsets_rows


def state_note(group: str, state: str) -> None:
    """kafka-consumer-groups' note on stderr for an Empty group, or one rebalancing (any
    state but Empty, Stable and Dead: PreparingRebalance, CompletingRebalance)."""
    if state == "Empty":
        typer.echo(f"Consumer group '{group}' has no active members.", err=True)
    elif state not in ("Stable", "Dead"):
        typer.echo(f"Warning: Consumer group '{group}' is rebalancing.", err=True)


def _described(admin: GroupAdmin, group: str) -> GroupDescription:
    """The group's description; a Dead one (it does not exist) raises GroupNotFound."""
    from kafkactl.cli.offsets import GroupNotFound

    desc = admin.describe_group(group)
    if desc.state == "Dead":
        raise GroupNotFound(group)
    state_note(group, desc.state)
    return desc


def assignment_string(tps: list[tuple[str, int]]) -> str:
    """`topic(0,1), other(2)` (Kafka's ASSIGNMENT column), `-` for none."""
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return ", ".join(f"{t}({','.join(str(p) for p in sorted(ps))})"
                     for t, ps in sorted(by_topic.items())) or "-"


def state_rows(admin: GroupAdmin, group: str) -> list[dict[str, Any]]:
    """One row: GROUP, COORDINATOR (ID), ASSIGNMENT-STRATEGY, STATE, #MEMBERS."""
    desc = _described(admin, group)
    host, port, node = admin.find_coordinator(group)
    return [{"group": group, "coordinator": {"host": host, "port": port, "id": node},
             "assignment_strategy": desc.protocol or None, "state": desc.state,
             "members": len(desc.members)}]


def member_rows(admin: GroupAdmin, group: str) -> list[dict[str, Any]]:
    """One row per member: GROUP, CONSUMER-ID, GROUP-INSTANCE-ID, HOST, CLIENT-ID,
    #PARTITIONS and its assignment."""
    desc = _described(admin, group)
    return [{"group": group, "consumer_id": m.member_id,
             "group_instance_id": m.group_instance_id, "host": m.client_host,
             "client_id": m.client_id, "partitions": len(m.assignment),
             "assignment": [{"topic": t, "partition": p} for t, p in m.assignment]}
            for m in sorted(desc.members, key=lambda m: (-len(m.assignment), m.member_id))]


def print_rows(rows: list[dict[str, Any]], *, state: bool, verbose: bool) -> None:
    """--state's or --members' table (none when no group has a row)."""
    if rows and state:
        print_states(rows)
    elif rows:
        print_members(rows, verbose)


def print_states(rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    from kafkactl.cli._output import print_table

    table = Table("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS",
                  box=None)
    for r in rows:
        c = r["coordinator"]
        table.add_row(r["group"], f"{c['host']}:{c['port']} ({c['id']})",
                      r["assignment_strategy"] or "-", r["state"], str(r["members"]))
    print_table(table)


def print_members(rows: list[dict[str, Any]], verbose: bool) -> None:
    from rich.table import Table

    from kafkactl.cli._output import print_table

    instance = any(r["group_instance_id"] for r in rows)  # as Kafka: only when one has it
    columns = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if instance else []), "HOST",
               "CLIENT-ID", "#PARTITIONS", *(["ASSIGNMENT"] if verbose else [])]
    table = Table(*columns, box=None)
    for r in rows:
        cells = [r["group"], r["consumer_id"],
                 *([r["group_instance_id"] or "-"] if instance else []), r["host"],
                 r["client_id"], str(r["partitions"])]
        if verbose:
            cells.append(assignment_string([(a["topic"], a["partition"])
                                            for a in r["assignment"]]))
        table.add_row(*cells)
    print_table(table)
