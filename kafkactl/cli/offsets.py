"""`kafkactl offsets list|show|reset|delete|migrate`: consumer groups and their committed
offsets (kafka-consumer-groups --list / --describe / --reset-offsets / --delete[-offsets];
`migrate` moves ZooKeeper-stored offsets into the broker, in kafkactl.cli.offsets_migrate)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from typer.core import TyperCommand

from kafkactl.cli._client_options import (
    bootstrap_option,
    client_security,
    command_config_option,
    fail,
    iso_datetime_ms,
    property_option,
)
from kafkactl.cli._output import print_table
from kafkactl.cli._topic_name import check_topic

if TYPE_CHECKING:  # the client is imported when a command runs, so --help stays fast
    from rich.table import Table

    from kafkactl.client.consumer import SimpleConsumer
    from kafkactl.client.group.group_admin import GroupAdmin, GroupDescription
    from kafkactl.client.kafka_client import KafkaClient

offsets_app = typer.Typer(help="List groups; show, reset, delete and migrate consumer-group "
                          "offsets.",
                          no_args_is_help=True)
T = TypeVar("T")
TopicPartition = tuple[str, int]
INACTIVE = ("Empty", "Dead")


def _run(bootstrap: str | None, prop: list[str], command_config: Path | None,
         fn: Callable[[KafkaClient, GroupAdmin, SimpleConsumer], T]) -> T:
    from kafkactl.client.consumer import SimpleConsumer
    from kafkactl.client.errors import ClientError
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.protocol.errors import KafkaError

    security = client_security(prop, command_config)
    try:
        client = KafkaClient(bootstrap, client_id="kafkactl-offsets", security=security)
    except (ClientError, ValueError) as e:
        raise fail(str(e)) from None
    admin = GroupAdmin(client)
    try:
        return fn(client, admin, SimpleConsumer(client=client))
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None
    finally:
        admin.close()
        client.close()


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """`T` or `T:0,2,5` (kafka-consumer-groups' --topic form)."""
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise typer.BadParameter(f"bad --topic {spec!r}: expected TOPIC or TOPIC:P,P")
    check_topic(topic, "--topic")  # a name Kafka does not allow: said before connecting
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        partitions = []
    if not partitions:  # "T:" or "T:x" (an empty list would mean: none of them)
        raise typer.BadParameter(f"bad partitions in --topic {spec!r}: expected numbers "
                                 "like T:0,1")
    return topic, partitions


def parse_datetime(text: str, option: str = "--to-datetime") -> int:
    """ISO-8601 (`2024-05-01T12:00:00.000`, optional zone: `Z`, `+05:00`, `+0500`, `+05`)
    -> ms since the epoch. Without a zone the time is UTC, never the machine's local time:
    as Kafka's tools read it (Utils.getDateTime appends `Z` to a time with no zone)."""
    try:
        return iso_datetime_ms(text)
    except ValueError:
        raise typer.BadParameter(f"bad {option} {text!r}: expected "
                                 "YYYY-MM-DDTHH:mm:SS[.sss][Z|+HH:MM] (UTC without a "
                                 "zone)") from None


class GroupNotFound(ValueError):
    """The group does not exist: Dead, with no committed offsets."""

    def __init__(self, group: str) -> None:
        super().__init__(f"Consumer group '{group}' does not exist.")


def missing_partitions(simple: SimpleConsumer, tps: Iterable[TopicPartition]
                       ) -> set[TopicPartition]:
    """The partitions of `tps` whose topic (or the partition) does not exist, per one
    metadata request that never auto-creates: a deleted topic's committed offsets."""
    from kafkactl.protocol.errors import ErrorCode

    tps = set(tps)
    if not tps:
        return set()
    cluster = simple.client.refresh_metadata(sorted({t for t, _p in tps}))
    out = set()
    for t, p in tps:
        tm = cluster.topics.get(t)
        if tm is None or tm.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or (
                not tm.error_code and p not in tm.partitions):
            out.add((t, p))
    return out


def _warn_stale(group: str, stale: Iterable[TopicPartition], what: str) -> None:
    """One warning per topic that does not exist but the group has offsets of."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(stale):
        by_topic.setdefault(t, []).append(p)
    for t, ps in by_topic.items():
        typer.echo(f"warning: group {group}: topic {t!r} does not exist (deleted?): {what} "
                   f"({', '.join(f'{t}-{p}' for p in ps)}); `kafkactl offsets delete "
                   f"-G {group} --topic {t} --execute` removes them", err=True)


def _warn_assigned_stale(group: str, stale: Iterable[TopicPartition]) -> None:
    """One warning per topic that does not exist but a member is still assigned."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(stale):
        by_topic.setdefault(t, []).append(p)
    for t, ps in by_topic.items():
        typer.echo(f"warning: group {group}: topic {t!r} does not exist (deleted?): its "
                   f"partitions have no log end offset but are still assigned to a member "
                   f"({', '.join(f'{t}-{p}' for p in ps)}) until the group rebalances",
                   err=True)


def group_offsets_rows(admin: GroupAdmin, simple: SimpleConsumer,
                       group: str) -> list[dict[str, Any]]:
    """The group's rows (kafka-consumer-groups --describe): a committed offset of a topic
    that no longer exists has no log end offset and no lag (a warning says so); a member
    with no partition has a row with no topic and partition; a group that does not exist
    raises GroupNotFound."""
    from kafkactl.client.admin import LEADER_GRACE_S
    from kafkactl.client.errors import ClientError
    from kafkactl.client.fetcher import LATEST
    from kafkactl.protocol.errors import KafkaError

    committed = {tp: o for tp, o in admin.fetch_offsets(group).items() if o >= 0}
    owners: dict[TopicPartition, Any] = {}
    m: Any
    try:
        desc = admin.describe_group(group)
        for m in desc.members:
            for tp in m.assignment:
                owners[tp] = m
    except (KafkaError, ClientError):
        desc = None
    if desc is not None and desc.state == "Dead" and not committed:
        raise GroupNotFound(group)
    tps = sorted(set(committed) | set(owners))
    # a topic deleted since: its committed offsets, and the partitions a member is still
    # assigned until the group rebalances, have no log end offset (LAG "-")
    stale = missing_partitions(simple, tps)
    if stale & set(committed):
        _warn_stale(group, stale & set(committed),
                    "its committed offsets have no log end offset")
    _warn_assigned_stale(group, stale - set(committed))
    ends: dict[TopicPartition, int] = {}
    live = [tp for tp in tps if tp not in stale]
    if live:
        # a partition with no leader gets no log end offset (LAG "-") after a short wait,
        # rather than holding up the whole table
        found, why = simple.try_list_offsets(dict.fromkeys(live, LATEST),
                                             min(simple.client.request_timeout, LEADER_GRACE_S))
        ends = {tp: v[0] for tp, v in found.items()}
        for (t, p), reason in sorted(why.items()):
            typer.echo(f"warning: {t}-{p}: no log end offset ({reason})", err=True)
    rows = []
    for tp in tps:
        cur = committed.get(tp)
        end = ends.get(tp)
        m = owners.get(tp)
        # as Kafka: a committed offset past the log end (the log was truncated or
        # recreated) shows a negative lag
        rows.append({"group": group, "topic": tp[0], "partition": tp[1],
                     "current_offset": cur, "log_end_offset": end,
                     "lag": None if cur is None or end is None else end - cur,
                     "consumer_id": m.member_id if m else None,
                     "host": m.client_host if m else None,
                     "client_id": m.client_id if m else None,
                     "state": desc.state if desc else None})
    # as kafka-consumer-groups --describe: a member with no partition has a row of its own
    if desc is not None:
        rows.extend({"group": group, "topic": None, "partition": None,
                     "current_offset": None, "log_end_offset": None, "lag": None,
                     "consumer_id": m.member_id, "host": m.client_host,
                     "client_id": m.client_id, "state": desc.state}
                    for m in desc.members if not m.assignment)
    return rows


def _dash(v: Any) -> str:
    return "-" if v is None else str(v)


def _exit_on_errors(failed: dict[TopicPartition, int]) -> None:
    """One `error:` line per partition that failed, then exit 1."""
    if not failed:
        return
    from kafkactl.protocol.errors import error_name

    for (t, p), c in sorted(failed.items()):
        typer.echo(f"error: {t}-{p}: {error_name(c)}", err=True)
    raise typer.Exit(1)


def _table(*columns: str) -> Table:
    from rich.table import Table

    return Table(*columns, box=None)


def _print_table(table: Table) -> None:
    print_table(table)


GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")


def _states(values: list[str]) -> set[str]:
    """--state values (repeatable or comma-separated, any case) -> Kafka's state names."""
    by_lower = {s.lower(): s for s in GROUP_STATES}
    out = set()
    for v in values:
        for name in filter(None, (x.strip() for x in v.split(","))):
            state = by_lower.get(name.lower())
            if state is None:
                raise fail(f"--state {name}: unknown group state (use "
                           f"{', '.join(GROUP_STATES)})", 2)
            out.add(state)
    return out


class _OptionalStateCommand(TyperCommand):
    """`offsets list`, whose --state takes an optional value, as kafka-consumer-groups'
    `--list --state` (joptsimple's withOptionalArg): a --state followed by nothing or by
    another option is given as `--state=` (every group, with its state). Click has no
    option with an optional value here, so the arguments are rewritten before parsing."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        out = []
        for i, arg in enumerate(args):
            if arg == "--":
                out += args[i:]
                break
            following = args[i + 1] if i + 1 < len(args) else None
            if arg == "--state" and (following is None or
                                     (following.startswith("-") and len(following) > 1)):
                arg = "--state="
            out.append(arg)
        return super().parse_args(ctx, out)


@offsets_app.command("list", cls=_OptionalStateCommand)
def list_groups(
    state: list[str] = typer.Option(
        [], "--state",
        help="Prints GROUP and STATE; with a value, only the groups in that state "
             "(repeatable or comma-separated: Stable, Empty, PreparingRebalance, "
             "CompletingRebalance, Dead); without one, every group."),
    as_json: bool = typer.Option(False, "--json", help="A JSON array of groups."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """The consumer groups' names, from every broker (kafka-consumer-groups --list)."""
    wanted = _states(state)
    groups = _run(bootstrap, prop, command_config,
                  lambda _client, admin, _simple: admin.list_groups())
    if wanted:
        groups = [g for g in groups if g[2] in wanted]
    if as_json:
        typer.echo(json.dumps([{"group": g, "protocol_type": t, "state": st}
                               for g, t, st in groups], indent=1))
        return
    if not state:  # without --state: the names only
        for g, _t, _st in groups:
            typer.echo(g)
        return
    if wanted and not groups:
        typer.echo("No groups in state " + ", ".join(sorted(wanted)) + ".", err=True)
        return
    table = _table("GROUP", "STATE")
    for g, _t, st in groups:
        table.add_row(g, st)
    _print_table(table)


def _print_offsets(rows: list[dict[str, Any]]) -> None:
    table = _table("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                   "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")
    for r in rows:
        table.add_row(r["group"], _dash(r["topic"]), _dash(r["partition"]),
                      _dash(r["current_offset"]), _dash(r["log_end_offset"]),
                      _dash(r["lag"]), _dash(r["consumer_id"]), _dash(r["host"]),
                      _dash(r["client_id"]))
    _print_table(table)


@offsets_app.command("show")
def show(group: list[str] = typer.Option([], "--group", "-G", "-g", help="Group (repeatable)."),
         all_groups: bool = typer.Option(False, "--all", help="Every group."),
         state: bool = typer.Option(False, "--state",
                                    help="One line per group: coordinator, assignment "
                                         "strategy, state and number of members."),
         members: bool = typer.Option(False, "--members",
                                      help="One line per member: id, host, client id and "
                                           "number of partitions."),
         verbose: bool = typer.Option(False, "--verbose",
                                      help="With --members: each member's assignment too."),
         as_json: bool = typer.Option(False, "--json", help="JSON output."),
         bootstrap: str | None = bootstrap_option(),
         prop: list[str] = property_option(),
         command_config: Path | None = command_config_option()) -> None:
    """Per partition: committed offset, log end offset and lag (plus the owning member);
    or, with --state / --members, the group's state or its members."""
    if not group and not all_groups:
        raise fail("give --group G (repeatable) or --all", 2)
    if group and all_groups:
        raise fail("give --group G (repeatable) or --all, not both", 2)
    from kafkactl.cli import offsets_describe as od

    rows_of = od.rows_of(state=state, members=members, verbose=verbose,
                         offsets=group_offsets_rows)

    def go(client: KafkaClient, admin: GroupAdmin, simple: SimpleConsumer
           ) -> tuple[list[Any], list[str]]:
        from kafkactl.client.errors import ClientError
        from kafkactl.protocol.errors import KafkaError

        names = [g for g, _t, _s in admin.list_groups()] if all_groups else list(group)
        rows: list[Any] = []
        errors: list[str] = []
        for g in names:
            # one group's failure is said, and the others are shown
            try:
                rows.extend(rows_of(admin, simple, g))
            except GroupNotFound as e:
                if not all_groups:  # (one --all listed a moment ago is gone since)
                    errors.append(str(e))
            except (ClientError, KafkaError, ValueError) as e:
                if len(names) == 1:
                    raise
                errors.append(f"group {g}: {e}")
        return rows, errors

    rows, errors = _run(bootstrap, prop, command_config, go)
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
    elif state or members:
        od.print_rows(rows, state=state, verbose=verbose)
    elif rows:
        _print_offsets(rows)
    elif not errors:
        typer.echo("No committed offsets.", err=True)
    for e in errors:
        typer.echo(f"error: {e}", err=True)
    if errors:
        raise typer.Exit(1)


@offsets_app.command("reset")
def reset(group: str = typer.Option(..., "--group", "-G", "-g", help="The group."),
          topic: list[str] = typer.Option([], "--topic", "-t",
                                          help="T or T:P,P (repeatable); default: every "
                                               "partition the group has offsets for."),
          all_topics: bool = typer.Option(False, "--all-topics",
                                          help="Every partition the group has committed "
                                               "offsets for (the default scope)."),
          to_earliest: bool = typer.Option(False, "--to-earliest",
                                           help="To each partition's earliest offset."),
          to_latest: bool = typer.Option(False, "--to-latest",
                                         help="To each partition's end offset."),
          to_current: bool = typer.Option(False, "--to-current",
                                          help="To the committed offset (the end offset "
                                               "where none is committed)."),
          to_offset: int | None = typer.Option(None, "--to-offset",
                                               help="To this offset (clamped to the log)."),
          to_datetime: str | None = typer.Option(None, "--to-datetime",
                                                 help="YYYY-MM-DDTHH:mm:SS[.sss][Z|+HH:MM]; "
                                                      "without a zone: UTC, as Kafka's "
                                                      "tools read it."),
          by_duration: str | None = typer.Option(None, "--by-duration", metavar="PnDTnHnMnS",
                                                 help="To the offsets at now minus this "
                                                      "ISO-8601 duration (e.g. PT1H30M)."),
          shift_by: int | None = typer.Option(None, "--shift-by", help="By N (negative: back)."),
          from_file: Path | None = typer.Option(None, "--from-file", metavar="CSV",
                                                dir_okay=False,
                                                help="To the offsets of a CSV of "
                                                     "TOPIC,PARTITION,OFFSET lines (what "
                                                     "--export writes)."),
          execute: bool = typer.Option(False, "--execute",
                                       help="Commit the new offsets (default: dry run)."),
          dry_run: bool = typer.Option(False, "--dry-run",
                                       help="Only show the new offsets (the default)."),
          export: bool = typer.Option(False, "--export",
                                      help="Print the new offsets as CSV (TOPIC,PARTITION,"
                                           "OFFSET, for --from-file) instead of a table."),
          as_json: bool = typer.Option(False, "--json", help="JSON output."),
          bootstrap: str | None = bootstrap_option(),
          prop: list[str] = property_option(),
          command_config: Path | None = command_config_option()) -> None:
    """Reset a group's offsets (dry run unless --execute; the group must be inactive)."""
    from kafkactl.cli import offsets_reset_plan as rp

    specs = [s for s, on in (("earliest", to_earliest), ("latest", to_latest),
                             ("current", to_current), ("offset", to_offset is not None),
                             ("datetime", to_datetime is not None),
                             ("duration", by_duration is not None),
                             ("shift", shift_by is not None),
                             ("file", from_file is not None)) if on]
    if len(specs) != 1:
        raise fail("give exactly one of --to-earliest, --to-latest, --to-current, "
                   "--to-offset N, --to-datetime ISO, --by-duration PnDTnHnMnS, "
                   "--shift-by N, --from-file CSV", 2)
    for clash, why in (((execute, dry_run), "--execute and --dry-run"),
                       ((export, as_json), "--export and --json"),
                       ((all_topics, bool(topic)), "--all-topics and --topic"),
                       ((from_file is not None, all_topics or bool(topic)),
                        "--from-file (it names the partitions) and --topic / --all-topics")):
        if all(clash):
            raise fail(f"give only one of {why}", 2)
    kind = specs[0]
    try:
        topics = [parse_topic_spec(t) for t in topic]
        value = {"offset": to_offset, "shift": shift_by,
                 "datetime": parse_datetime(to_datetime) if to_datetime else None,
                 "duration": rp.duration_timestamp(rp.parse_duration(by_duration))
                 if by_duration else None}.get(kind)
        plan_in = rp.read_plan_csv(from_file, group) if from_file is not None else None
    except typer.BadParameter as e:
        raise fail(str(e), 2) from None

    def go(client: KafkaClient, admin: GroupAdmin, simple: SimpleConsumer) -> Any:
        state = admin.describe_group(group).state
        if state not in INACTIVE:
            raise ValueError(f"Assignments can only be reset if the group '{group}' is "
                             f"inactive, but the current state is {state}. Stop its "
                             "consumers first.")
        plan = rp.plan_reset(client, admin, simple, group, topics, (kind, value or 0),
                             plan_in)
        errors = admin.commit_offsets(group, plan) if execute else {}
        return plan, errors

    plan, errors = _run(bootstrap, prop, command_config, go)
    from kafkactl.protocol.errors import error_name

    failed = {tp: c for tp, c in errors.items() if c}
    if as_json:
        typer.echo(json.dumps({"group": group, "executed": execute, "offsets": [
            {"topic": t, "partition": p, "new_offset": o,
             "error": error_name(failed[(t, p)]) if (t, p) in failed else None}
            for (t, p), o in sorted(plan.items())]}, indent=1))
    elif export:
        typer.echo(rp.export_csv(plan), nl=False)
    else:
        table = _table("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
        for (t, p), o in sorted(plan.items()):
            table.add_row(group, t, str(p), str(o))
        _print_table(table)
    if not execute and not as_json:
        typer.echo("Dry run: nothing was committed; add --execute to apply.", err=True)
    _exit_on_errors(failed)


def predicted_delete_errors(desc: GroupDescription, tps: list[TopicPartition]
                            ) -> dict[TopicPartition, int]:
    """What the broker's OffsetDelete would answer for `tps`, as far as the group's
    description tells (Kafka's rule): a group of another protocol with members refuses as
    a whole (NON_EMPTY_GROUP, raised); a consumer group with members refuses the topics
    its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC). A group that is rebalancing does
    not show its subscriptions: a warning says the outcome is unknown."""
    from kafkactl.protocol.errors import ErrorCode

    if not desc.members:
        return {}
    if desc.protocol_type not in ("", "consumer"):
        raise ValueError(f"Deleting offsets of a consumer group '{desc.group_id}' is "
                         "forbidden if the group is not empty (NON_EMPTY_GROUP)")
    if desc.state != "Stable":
        typer.echo(f"warning: group {desc.group_id} is {desc.state}: its subscriptions are "
                   "not known until it is Stable, and --execute fails for a topic it "
                   "subscribes to", err=True)
        return {}
    subscribed = {t for m in desc.members for t in m.subscription}
    return {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in tps if tp[0] in subscribed}


@offsets_app.command("delete")
def delete(group: str = typer.Option(..., "--group", "-G", "-g", help="The group."),
           topic: list[str] = typer.Option([], "--topic", "-t",
                                           help="Only this topic's offsets (T or T:P,P)."),
           execute: bool = typer.Option(False, "--execute",
                                        help="Delete (default: dry run, show what would go)."),
           as_json: bool = typer.Option(False, "--json", help="JSON output."),
           bootstrap: str | None = bootstrap_option(),
           prop: list[str] = property_option(),
           command_config: Path | None = command_config_option()) -> None:
    """Delete a group's offsets for a topic, or (without --topic) the whole inactive group
    (dry run unless --execute)."""
    try:
        topics = [parse_topic_spec(t) for t in topic]
    except typer.BadParameter as e:
        raise fail(str(e), 2) from None

    def go(client: KafkaClient, admin: GroupAdmin, simple: SimpleConsumer) -> Any:
        committed = {tp: o for tp, o in admin.fetch_offsets(group).items() if o >= 0}
        if not topics:
            state = admin.describe_group(group).state
            if state == "Dead" and not committed:
                raise GroupNotFound(group)
            if state not in INACTIVE:
                raise ValueError(f"group {group!r} is {state}: only an inactive group can be "
                                 "deleted; stop its consumers first")
            if execute:
                admin.delete_group(group)
            return None, committed, {}
        tps = sorted(tp for tp in committed if any(
            tp[0] == t and (partitions is None or tp[1] in partitions) for t, partitions in topics))
        if not tps:
            if not committed and admin.describe_group(group).state == "Dead":
                raise GroupNotFound(group)
            raise ValueError(f"group {group!r} has no offsets for "
                             f"{', '.join(t for t, _ in topics)}")
        if execute:
            return tps, committed, admin.delete_offsets(group, tps)
        return tps, committed, predicted_delete_errors(admin.describe_group(group), tps)

    tps, committed, result = _run(bootstrap, prop, command_config, go)
    from kafkactl.protocol.errors import error_name

    whole = tps is None
    shown = sorted(committed) if whole else tps
    failed = {tp: c for tp, c in result.items() if c}
    if as_json:
        typer.echo(json.dumps({"group": group, "executed": execute, "whole_group": whole,
                               "offsets": [
            {"topic": t, "partition": p, "committed_offset": committed[(t, p)],
             "error": error_name(failed[(t, p)]) if (t, p) in failed else None}
            for t, p in shown]}, indent=1))
    elif whole:
        verb = "Deleted" if execute else "Would delete"
        typer.echo(f"{verb} group {group} ({len(committed)} committed offsets).")
    else:
        verb = "Deleted" if execute else "Would delete"
        for t, p in shown:
            if (t, p) not in failed:
                typer.echo(f"{verb} the offset of {t}-{p} ({committed[(t, p)]}) "
                           f"for group {group}.")
    if not execute:
        typer.echo("Dry run: nothing was deleted; add --execute to apply"
                   + (" (the partitions named below would fail)." if failed else "."),
                   err=True)
    _exit_on_errors(failed)


def register(app: typer.Typer) -> None:
    from kafkactl.cli.offsets_migrate import migrate

    offsets_app.command("migrate")(migrate)
    app.add_typer(offsets_app, name="offsets")
