"""`kafkactl rebalance --group G [--json] [--trigger] [--dry-run]`: the seed's consumer
rebalancing, shown and driven; `--partitions [--execute]` (with `--plan-out`/`--plan-in`,
`--replication-factor`, `--verify`, `--cancel`), `--preferred-leaders` and
`--unclean-leaders` (with `-t T --partition P` or `--all-topic-partitions`) move partition
replicas and leadership in a cluster (kafkactl.cli.rebalance_partitions).

Prints each member with its subscription, its current assignment and the assignment the
range algorithm (sort partitions, sort members, contiguous blocks, remainders to the first
members) computes for the same members. `--trigger` makes the group rebalance: a transient
member joins (every member must rejoin), then leaves. `--dry-run` only shows.
"""

from __future__ import annotations

import json
import math
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
from kafkactl.cli._output import print_table


def rebalance(group: str | None = typer.Option(None, "--group", "-G", "-g",
                                               help="The consumer group."),
              partitions: bool = typer.Option(
                  False, "--partitions", help="Spread each topic's replicas evenly over the "
                  "live brokers with the fewest moves, never lowering a replication factor "
                  "(a dry run unless --execute; exit 1 if a topic was refused)."),
              preferred_leaders: bool = typer.Option(
                  False, "--preferred-leaders",
                  help="Give leadership back to each partition's preferred replica "
                       "(--dry-run: only show which would move)."),
              unclean_leaders: bool = typer.Option(
                  False, "--unclean-leaders",
                  help="Elect a leader for each named partition that has no live leader "
                       "(kafka-leader-election --election-type unclean): its first live "
                       "in-sync replica, else its first live replica even out of sync, "
                       "which MAY LOSE ACKNOWLEDGED RECORDS. Name the partitions (-t TOPIC "
                       "--partition P) or give --all-topic-partitions; --dry-run only shows "
                       "who would lead."),
              topic: list[str] = typer.Option([], "--topic", "-t",
                                              help="With --partitions / --preferred-leaders: "
                                                   "only these topics (repeatable); with "
                                                   "--partition: the one topic."),
              partition: list[str] = typer.Option(
                  [], "--partition", metavar="P",
                  help="With --preferred-leaders / --unclean-leaders and one -t: only these "
                       "partitions of it (repeatable, or 0,2)."),
              all_partitions: bool = typer.Option(
                  False, "--all-topic-partitions",
                  help="With --unclean-leaders: every partition of every topic (internal "
                       "ones too)."),
              execute: bool = typer.Option(False, "--execute",
                                           help="With --partitions: move the replicas."),
              plan_out: Path | None = typer.Option(
                  None, "--plan-out", metavar="FILE", dir_okay=False,
                  help="With --partitions: write the plan to FILE in "
                       "kafka-reassign-partitions' JSON (to review, edit, replay)."),
              plan_in: Path | None = typer.Option(
                  None, "--plan-in", metavar="FILE", dir_okay=False,
                  help="With --partitions: take the plan from FILE (that JSON) instead of "
                       "planning; with --verify / --cancel: the partitions to check."),
              replication_factor: int | None = typer.Option(
                  None, "--replication-factor", metavar="N",
                  help="With --partitions: give the topics N replicas (raise or lower it "
                       "on purpose; without it a replication factor is never lowered)."),
              verify: bool = typer.Option(
                  False, "--verify", help="With --partitions: is each reassignment (of "
                  "--plan-in, or in progress) complete? Exit 0 only when all are."),
              cancel: bool = typer.Option(
                  False, "--cancel", help="With --partitions: cancel the reassignments "
                  "in progress (of --plan-in's partitions, or all)."),
              throttle: int | None = typer.Option(
                  None, "--throttle", metavar="BYTES_PER_S",
                  help="With --partitions --execute: copy the moving replicas at most this "
                       "fast (Kafka's replication throttle configs; --verify removes them "
                       "once the moves are complete)."),
              additional: bool = typer.Option(
                  False, "--additional",
                  help="With --partitions --execute: start the moves in addition to the "
                       "reassignments in progress (without it --execute is refused while "
                       "any is, as kafka-reassign-partitions does); --throttle then "
                       "covers those too, so resubmitting the --plan-in plan in progress "
                       "with --additional --throttle changes its throttle."),
              as_json: bool = typer.Option(False, "--json", help="JSON output."),
              do_trigger: bool = typer.Option(False, "--trigger",
                                              help="Force the group to rebalance."),
              dry_run: bool = typer.Option(False, "--dry-run",
                                           help="Only show (with --trigger: do nothing)."),
              timeout: float = typer.Option(60.0, "--timeout",
                                            help="Seconds to wait for a triggered "
                                                 "rebalance, or for the moves of "
                                                 "--partitions --execute (they go on "
                                                 "after it: --verify)."),
              bootstrap: str | None = bootstrap_option(),
              prop: list[str] = property_option(),
              command_config: Path | None = command_config_option(),
              zookeeper: str | None = typer.Option(
                  None, "--zookeeper", metavar="HOST:PORT[/CHROOT]",
                  help="A ZooKeeper-coordinated group (consume --zookeeper): members, "
                       "owners and the seed's plan from /consumers/GROUP.")) -> None:
    """Members, their current assignment and the range assignment for the group; or, with
    --partitions / --preferred-leaders, replicas and leaders over the brokers."""
    cluster_mode = partitions or preferred_leaders or unclean_leaders
    _check_timeout(timeout, do_trigger and not cluster_mode)
    _check_mode(group=group, partitions=partitions, preferred_leaders=preferred_leaders,
                unclean_leaders=unclean_leaders, trigger=do_trigger, zookeeper=zookeeper,
                topic=bool(topic), partition=bool(partition), all_partitions=all_partitions,
                execute=execute, plan_out=plan_out, plan_in=plan_in,
                replication_factor=replication_factor, verify=verify, cancel=cancel,
                throttle=throttle, additional=additional)
    security = client_security(prop, command_config)
    if cluster_mode:
        from kafkactl.cli import rebalance_partitions as rp

        if partitions:
            rp.rebalance_partitions(bootstrap, topic, execute=execute and not dry_run,
                                    as_json=as_json, timeout=timeout, security=security,
                                    plan_out=plan_out, plan_in=plan_in,
                                    replication_factor=replication_factor, verify=verify,
                                    cancel=cancel, throttle=throttle,
                                    additional=additional)
            return
        numbers = _partition_numbers(partition)
        if unclean_leaders:
            named = None if all_partitions else _named(topic, numbers, "--unclean-leaders")
            rp.unclean_leaders(bootstrap, named, as_json=as_json, security=security,
                               dry_run=dry_run)
        else:
            chosen = None if numbers is None else _named(topic, numbers,
                                                         "--preferred-leaders")
            rp.preferred_leaders(bootstrap, topic, as_json=as_json, security=security,
                                 dry_run=dry_run, partitions=chosen)
        return
    if group is None:
        raise fail("give --group G (or --partitions / --preferred-leaders / "
                   "--unclean-leaders)", 2)

    if zookeeper:
        from kafkactl.cli.rebalance_zookeeper import zookeeper_rebalance

        zookeeper_rebalance(group, zookeeper, as_json=as_json,
                            trigger=do_trigger and not dry_run, timeout=timeout)
        if do_trigger and dry_run:
            typer.echo("Dry run: no rebalance was triggered.", err=True)
        return

    _group_rebalance(group, bootstrap, security, as_json=as_json, trigger=do_trigger,
                     dry_run=dry_run, timeout=timeout)


def _group_rebalance(group: str, bootstrap: str | None, security: Any, *, as_json: bool,
                     trigger: bool, dry_run: bool, timeout: float) -> None:
    from rich.table import Table

    from kafkactl.client.errors import ClientError
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.protocol.errors import KafkaError

    client = KafkaClient(bootstrap, client_id=TRANSIENT_CLIENT_ID, security=security)
    admin = GroupAdmin(client)
    triggered = None
    was_rebalancing = False
    settled = True
    try:
        desc = admin.describe_group(group)
        if desc.state == "Dead":
            raise ValueError(f"group {group!r} does not exist")
        plan = admin.range_plan(desc)
        if trigger and not dry_run:
            if desc.state in ("PreparingRebalance", "CompletingRebalance"):
                typer.echo(f"Group {group} is rebalancing already ({desc.state}): waiting "
                           "for that rebalance to end.", err=True)
            started = time.monotonic()
            triggered = admin.trigger_rebalance(desc, timeout)
            was_rebalancing = triggered is None
            # every member rejoined once within `took`; after kafkactl's member left they
            # rejoin once more, on their next heartbeat (3 s by default) or poll
            took = time.monotonic() - started
            desc, settled = _settled(admin, group, started + min(
                timeout, took + took + SETTLE_SLACK_S))
            plan = admin.range_plan(desc)
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None
    finally:
        admin.close()
        client.close()
    rows: list[dict[str, Any]] = [
        {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
         "client_id": m.client_id, "host": m.client_host, "subscription": m.subscription,
         "current": [f"{t}-{p}" for t, p in m.assignment],
         "range": [f"{t}-{p}" for t, p in plan.get(m.member_id, [])]}
        for m in sorted(desc.members, key=lambda m: m.member_id)]
    if as_json:
        typer.echo(json.dumps({"group": group, "state": desc.state,
                               "protocol": desc.protocol, "triggered_generation": triggered,
                               "settled": settled, "members": rows}, indent=1))
        if not settled:
            _say_unsettled(group, desc.state)
        return
    table = Table("MEMBER", "GROUP-INSTANCE-ID", "CLIENT-ID", "HOST", "SUBSCRIPTION",
                  "CURRENT", "RANGE",
                  title=f"group {group}: {desc.state}, protocol {desc.protocol or '-'}")
    for r in rows:
        table.add_row(r["member_id"], r["group_instance_id"] or "-", r["client_id"],
                      r["host"], ",".join(r["subscription"]),
                      " ".join(r["current"]) or "-", " ".join(r["range"]) or "-")
    print_table(table)
    if triggered is not None:
        typer.echo(f"Rebalance triggered: the group reached generation {triggered}"
                   + (", and is Stable again since kafkactl's member left (shown above)."
                      if settled and desc.state == "Stable" else "."))
    elif was_rebalancing:
        typer.echo("The group was rebalancing already; that rebalance has ended.")
    elif trigger:
        typer.echo("Dry run: no rebalance was triggered.", err=True)
    if not settled:
        _say_unsettled(group, desc.state)


def _settled(admin: Any, group: str, deadline: float) -> tuple[Any, bool]:
    """The group once it has settled after a triggered rebalance, and whether it did by
    `deadline`. kafkactl's transient member joined generation N and left, which starts one
    more rebalance (the coordinator moves the group to PreparingRebalance before it answers
    LeaveGroup): the group has settled when it is Stable (or Empty) without that member,
    so in a generation after N, with the assignment its members synced."""
    while True:
        desc = admin.describe_group(group)
        if desc.state in ("Stable", "Empty", "Dead") and not any(
                m.client_id == TRANSIENT_CLIENT_ID and not m.subscription
                for m in desc.members):
            return desc, True
        if time.monotonic() >= deadline:
            return desc, False
        time.sleep(min(0.1, max(deadline - time.monotonic(), 0)))


def _say_unsettled(group: str, state: str) -> None:
    typer.echo(f"warning: group {group} has not settled after the rebalance: it is still "
               f"{state} (its members have not all rejoined since kafkactl's member left), "
               "and the members are shown as they are now; `kafkactl rebalance -G "
               f"{group}` shows them later", err=True)


# how much longer than the triggered rebalance took the one after it (kafkactl's member
# leaving) may take before the group is shown unsettled, with a warning
SETTLE_SLACK_S = 10.0
# the client id of kafkactl's connections here, and so of its transient member
TRANSIENT_CLIENT_ID = "kafkactl-rebalance"
# the longest rebalance timeout JoinGroup carries (an int32 of milliseconds)
MAX_TIMEOUT_S = (2**31 - 1) // 1000
# the shortest for --trigger: every member must rejoin, on its next heartbeat (3 s by
# default) or poll
MIN_TRIGGER_TIMEOUT_S = 1.0


def _check_timeout(timeout: float, trigger: bool) -> None:
    """--timeout: a finite number of seconds above 0 and at most MAX_TIMEOUT_S; with
    --trigger at least MIN_TRIGGER_TIMEOUT_S."""
    ok = math.isfinite(timeout) and timeout <= MAX_TIMEOUT_S and (
        timeout >= MIN_TRIGGER_TIMEOUT_S if trigger else timeout > 0)
    if not ok:
        shown = f"from {MIN_TRIGGER_TIMEOUT_S:g}" if trigger else "above 0"
        raise fail(f"--timeout {timeout:g}: give seconds {shown} to {MAX_TIMEOUT_S}"
                   + (" (a rebalance waits for every member to rejoin)" if trigger else ""),
                   2)


def _check_mode(*, group: str | None, partitions: bool, preferred_leaders: bool,
                unclean_leaders: bool, trigger: bool, zookeeper: str | None, topic: bool,
                partition: bool, all_partitions: bool, execute: bool,
                plan_out: Path | None, plan_in: Path | None,
                replication_factor: int | None, verify: bool, cancel: bool,
                throttle: int | None, additional: bool = False) -> None:
    """A flag of one mode (a group's members: -G; replicas: --partitions /
    --preferred-leaders / --unclean-leaders) given in the other is refused rather than
    ignored."""
    reassign_only = [name for name, on in (
        ("--execute", execute), ("--plan-out", plan_out is not None),
        ("--plan-in", plan_in is not None),
        ("--replication-factor", replication_factor is not None), ("--verify", verify),
        ("--cancel", cancel), ("--throttle", throttle is not None),
        ("--additional", additional)) if on]
    modes = [name for name, on in (("--partitions", partitions),
                                   ("--preferred-leaders", preferred_leaders),
                                   ("--unclean-leaders", unclean_leaders)) if on]
    if len(modes) > 1:
        raise fail(f"give only one of {', '.join(modes)}", 2)
    if not modes:
        for flags, where in (
                (reassign_only, "--partitions"),
                (["-t/--topic"] if topic else [],
                 "--partitions / --preferred-leaders / --unclean-leaders"),
                (["--partition"] if partition else [],
                 "--preferred-leaders / --unclean-leaders"),
                (["--all-topic-partitions"] if all_partitions else [], "--unclean-leaders")):
            if flags:
                raise fail(f"{', '.join(flags)}: only with {where} (a group's rebalance "
                           "takes -G, --trigger, --dry-run, --timeout, --json)", 2)
        return
    group_only = [name for name, on in (("-G/--group", group is not None),
                                        ("--trigger", trigger),
                                        ("--zookeeper", zookeeper is not None)) if on]
    if group_only:
        raise fail(f"{', '.join(group_only)}: not with {modes[0]} (a group's rebalance is "
                   "`kafkactl rebalance -G GROUP`)", 2)
    if not partitions and reassign_only:
        raise fail(f"{', '.join(reassign_only)}: only with --partitions", 2)
    if partitions and partition:
        raise fail("--partition: only with --preferred-leaders / --unclean-leaders", 2)
    if all_partitions and not unclean_leaders:
        raise fail("--all-topic-partitions: only with --unclean-leaders", 2)
    if all_partitions and (topic or partition):
        raise fail("give either --all-topic-partitions or -t TOPIC --partition P", 2)


def _partition_numbers(values: list[str]) -> list[int] | None:
    """--partition's numbers (repeatable, or 0,2); None when not given."""
    if not values:
        return None
    try:
        numbers = sorted({int(p) for v in values for p in v.split(",") if p.strip()})
    except ValueError:
        numbers = []
    if not numbers or numbers[0] < 0:
        raise fail(f"bad --partition {','.join(values)!r}: expected partition numbers "
                   "like 0,2", 2)
    return numbers


def _named(topics: list[str], numbers: list[int] | None,
           mode: str) -> list[tuple[str, int]]:
    """The partitions -t TOPIC --partition P name (one topic: kafka-leader-election's
    --topic / --partition)."""
    if numbers is not None and not topics:
        raise fail("--partition needs -t TOPIC", 2)
    if numbers is None:  # an unclean election is held only where asked for
        raise fail(f"{mode} needs the partitions: -t TOPIC --partition P (repeatable), or "
                   "--all-topic-partitions for every partition", 2)
    if len(topics) > 1:
        raise fail("--partition goes with one -t TOPIC", 2)
    return [(topics[0], p) for p in numbers]


def register(app: typer.Typer) -> None:
    app.command("rebalance")(rebalance)
