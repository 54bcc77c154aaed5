"""`kafkactl rebalance --partitions`, `--preferred-leaders` and `--unclean-leaders`: spread
replicas evenly over the live brokers (after brokers were added or removed), give
leadership back to each partition's preferred replica, and elect a leader for partitions
that have none even out of the ISR (KIP-460; kafka-leader-election --election-type unclean).
The replicas move as Kafka moves them: the new ones copy the data as followers, and the old
ones are dropped only once the new ones are in sync.

The plan (kafkactl.cluster.reassignment_plan) is per topic, minimal and never lowers a
replication factor: a topic with fewer live brokers than its replication factor is refused
with the reason, and the others are still planned (and moved with --execute); the exit
status is then 1, so a script never takes a partial plan for a whole one. `--plan-out` /
`--plan-in` write and read plans in kafka-reassign-partitions' JSON; `--verify` and
`--cancel` answer and act as that tool's options do (the same sentences).

`--execute` prints the current replicas of the partitions it moves first, in that JSON
(Kafka's "Save this to use as the --reassignment-json-file option during rollback": here
`--plan-in`). As kafka-reassign-partitions, it refuses to start while any reassignment is
in progress unless `--additional` is given; a move that could not finish (a partition
without a live leader) is never planned, and a --plan-in plan with one is refused, as one
naming a broker that is not live.

`--throttle BYTES_PER_S` with `--execute` throttles the copying as kafka-reassign-partitions
does: before the moves start it sets the moving partitions' `leader.replication.throttled.
replicas` / `follower.replication.throttled.replicas` topic configs and the brokers'
`leader.replication.throttled.rate` / `follower.replication.throttled.rate` (with
`--additional`: over the moves in progress too, so none of them loses its throttle);
`--verify` removes them all once every reassignment is complete (while other
reassignments are still in progress it keeps those that the moves in progress use)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import fail
from kafkactl.cli._output import print_table

if TYPE_CHECKING:
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.cluster import ClusterMetadata

TopicPartition = tuple[str, int]
# ListPartitionReassignments: partition -> (replicas, adding, removing)
Reassignments = dict[TopicPartition, tuple[list[int], list[int], list[int]]]
NO_SUCH_PARTITION = "no such partition"
# kafka-reassign-partitions --execute while a reassignment is in progress, word for word
CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional "
    "to override this and create a new partition assignment in addition to the existing "
    "one. The --additional flag can also be used to change the throttle by resubmitting "
    "the current reassignment.")
DYNAMIC_BROKER = 2  # DescribeConfigs' config_source of a broker's own dynamic config


def _topics(cluster: ClusterMetadata, wanted: list[str]) -> list[str]:
    """`wanted`, or every topic, internal ones too (__consumer_offsets must leave a broker
    being removed like any other; kafka-leader-election's --all-topic-partitions names them)."""
    if wanted:
        return wanted
    return [t for t, m in cluster.topics.items() if not m.error_code]


def _assignments(cluster: ClusterMetadata) -> dict[str, dict[int, list[int]]]:
    return {name: {p: list(part.replicas) for p, part in t.partitions.items()}
            for name, t in cluster.topics.items() if not t.error_code}


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _check_options(*, execute: bool, plan_out: Path | None, plan_in: Path | None,
                   replication_factor: int | None, verify: bool, cancel: bool,
                   throttle: int | None = None, additional: bool = False) -> None:
    if additional and (not execute or verify or cancel):
        raise fail("--additional goes with --execute (it starts the plan's moves in "
                   "addition to the reassignments in progress)", 2)
    if throttle is not None and (not execute or verify or cancel):
        raise fail("--throttle goes with --execute (--verify removes the throttle once the "
                   "moves are complete)", 2)
    if throttle is not None and throttle < 1:
        raise fail("--throttle must be at least 1 byte/s", 2)
    if verify and cancel:
        raise fail("give either --verify or --cancel", 2)
    if (verify or cancel) and (execute or plan_out or replication_factor is not None):
        raise fail("--verify / --cancel take only --plan-in and -t (not --execute, "
                   "--plan-out or --replication-factor)", 2)
    if plan_in is not None and replication_factor is not None:
        raise fail("--replication-factor plans new replica sets; a --plan-in plan has "
                   "its own (edit the file instead)", 2)
    if replication_factor is not None and replication_factor < 1:
        raise fail("--replication-factor must be at least 1", 2)


def _read_plan(path: Path, topics: list[str]) -> dict[TopicPartition, list[int]]:
    from kafkactl.cluster.reassignment_plan import parse_reassignment_json

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"cannot read the plan {str(path)!r}: {e.strerror or e}") from None
    try:
        plan = parse_reassignment_json(text)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return {tp: r for tp, r in plan.items() if not topics or tp[0] in topics}


def _plan_from_file(cluster: ClusterMetadata, wanted: dict[TopicPartition, list[int]],
                    ongoing: set[TopicPartition], errors: dict[str, str], *,
                    additional: bool = False) -> dict[TopicPartition, list[int]]:
    """The partitions of a --plan-in plan that change (errors for the ones that cannot);
    with `additional`, those in `ongoing` too, resubmitted as they are (that is how
    kafka-reassign-partitions --additional changes a running move's target or throttle).
    A move that could not finish (stranded_moves) is refused as one to a broker that is
    not live: it too would wait for a broker to come back."""
    from kafkactl.cluster.reassignment_plan import stranded_moves

    out: dict[TopicPartition, list[int]] = {}
    for tp, target in sorted(wanted.items()):
        t = cluster.topics.get(tp[0])
        part = t.partitions.get(tp[1]) if t is not None and not t.error_code else None
        unknown = [b for b in target if b not in cluster.brokers]
        if part is None:
            errors[_name(tp)] = NO_SUCH_PARTITION
        elif unknown:
            errors[_name(tp)] = (f"broker {unknown[0]} is not live (live brokers: "
                                 f"{', '.join(map(str, sorted(cluster.brokers)))})")
        elif tp in ongoing:
            if additional:
                out[tp] = target
            else:
                errors[_name(tp)] = ("a reassignment of it is in progress: wait for it "
                                     "(--verify), cancel it (--cancel), or replace it "
                                     "with --execute --additional")
        elif stuck := stranded_moves({tp: target}, {tp: part.replicas}, cluster.brokers,
                                     {tp: part.leader}):
            errors[_name(tp)] = f"not moved: {stuck[tp]}"
        elif list(part.replicas) != target:
            out[tp] = target
            if len(target) != len(part.replicas):
                typer.echo(f"note: {_name(tp)}: replication factor {len(part.replicas)} -> "
                           f"{len(target)}, as the plan says", err=True)
    return out


def rebalance_partitions(bootstrap: str | None, topics: list[str], *, execute: bool,
                         as_json: bool, timeout: float, security: Any = None,
                         plan_out: Path | None = None, plan_in: Path | None = None,
                         replication_factor: int | None = None, verify: bool = False,
                         cancel: bool = False, throttle: int | None = None,
                         additional: bool = False) -> None:
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.errors import ClientError
    from kafkactl.cluster.reassignment_plan import plan_reassignment, to_reassignment_json
    from kafkactl.protocol.errors import KafkaError

    _check_options(execute=execute, plan_out=plan_out, plan_in=plan_in,
                   replication_factor=replication_factor, verify=verify, cancel=cancel,
                   throttle=throttle, additional=additional)
    if verify or cancel:
        _verify_or_cancel(bootstrap, topics, plan_in, cancel=cancel, as_json=as_json,
                          security=security)
        return
    errors: dict[str, str] = {}
    refused: dict[str, str] = {}
    stranded: dict[str, str] = {}
    rollback: dict[TopicPartition, list[int]] | None = None
    try:
        wanted = _read_plan(plan_in, topics) if plan_in is not None else None
        with AdminClient(bootstrap, client_id="kafkactl-rebalance",
                         security=security) as admin:
            cluster = admin.client.refresh_metadata(None)
            reassigning = admin.list_partition_reassignments()
            ongoing = set(reassigning)
            if execute and ongoing and not additional:
                # kafka-reassign-partitions' executeAssignment: a second plan must say it
                # goes with the first (its throttles are then set over both)
                raise ValueError(f"{CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE} In progress: "
                                 f"{_names(ongoing)} (`kafkactl rebalance --partitions "
                                 "--verify` shows them).")
            if wanted is not None:
                plan = _plan_from_file(cluster, wanted, ongoing, errors,
                                       additional=additional)
            else:
                planned = plan_reassignment(
                    _assignments(cluster), cluster.brokers, topics=_topics(cluster, topics),
                    replication_factor=replication_factor, in_progress=ongoing,
                    leaders=_leaders(cluster))
                plan, refused = planned.targets, planned.refused
                stranded = {_name(tp): why for tp, why in sorted(planned.stranded.items())}
            current = {tp: _before(cluster, reassigning, tp) for tp in plan}
            if plan_out is not None:
                _write(plan_out, to_reassignment_json(plan) + "\n")
            if not execute and ongoing and not as_json:
                typer.echo(f"note: reassignments are in progress ({_names(ongoing)}): "
                           "--execute needs --additional to start more", err=True)
            if execute and plan and not errors:
                rollback = current
                if not as_json:  # (--json: in the document, "rollback")
                    typer.echo(_rollback_text(current))
                if throttle is not None:
                    _set_throttles(admin, plan, current, throttle, reassigning,
                                   quiet=as_json)
                results = admin.alter_partition_reassignments(plan)
                errors = {_name(tp): str(e) for tp, e in results.items() if e}
                _wait(admin, set(plan) - {tp for tp, e in results.items() if e}, timeout,
                      quiet=as_json)
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None
    _show_plan(plan, current, execute=execute and not errors, as_json=as_json,
               refused=refused, errors=errors, stranded=stranded, rollback=rollback)
    new_leaders = sum(current[tp][:1] != target[:1] for tp, target in plan.items())
    if execute and new_leaders and not errors and not as_json:
        typer.echo(f"{new_leaders} partition(s) have a new preferred leader: "
                   "`kafkactl rebalance --preferred-leaders` gives them leadership (the "
                   "controller does too, with auto.leader.rebalance.enable).", err=True)
    for why in refused.values():
        typer.echo(f"error: {why}", err=True)
    for name, why in stranded.items():
        typer.echo(f"error: {name}: not planned: {why}", err=True)
    for name, why in errors.items():
        typer.echo(f"error: {name}: {why}", err=True)
    if errors or refused or stranded:
        raise typer.Exit(1)


def _names(tps: set[TopicPartition]) -> str:
    return ", ".join(map(_name, sorted(tps)))


def _leaders(cluster: ClusterMetadata) -> dict[TopicPartition, int]:
    return {(name, p): part.leader for name, t in cluster.topics.items() if not t.error_code
            for p, part in t.partitions.items()}


def _before(cluster: ClusterMetadata, reassigning: Reassignments,
            tp: TopicPartition) -> list[int]:
    """A partition's replicas before its move: while one is in progress (a resubmitted
    plan, --additional) the replicas it began from (the listed ones but the adding ones),
    which are what a rollback goes back to; else its replicas."""
    if tp in reassigning:
        replicas, adding, _removing = reassigning[tp]
        return [b for b in replicas if b not in adding]
    return list(cluster.topics[tp[0]].partitions[tp[1]].replicas)


def _rollback_text(current: dict[TopicPartition, list[int]]) -> str:
    """kafka-reassign-partitions --execute's first lines: the current replicas of the
    partitions to move, as a plan that moves them back (here that plan is --plan-in's)."""
    from kafkactl.cluster.reassignment_plan import to_reassignment_json

    return (f"Current partition replica assignment\n\n{to_reassignment_json(current)}\n\n"
            "Save this to use as the --plan-in option during rollback")


def _set_throttles(admin: AdminClient, plan: dict[TopicPartition, list[int]],
                   current: dict[TopicPartition, list[int]], rate: int,
                   reassigning: Reassignments, *, quiet: bool) -> None:
    """The throttled-replicas topic configs of the moving replicas, then the two rates on
    every broker involved (kafka-reassign-partitions --execute --throttle), over the
    plan's moves and the `reassigning` ones in progress (--additional): a topic's configs
    are replaced whole, and must keep naming the replicas of the moves already running."""
    from kafkactl.broker.replication_quota import (
        FOLLOWER_RATE,
        FOLLOWER_REPLICAS,
        LEADER_RATE,
        LEADER_REPLICAS,
    )
    from kafkactl.client.admin import BROKER_RESOURCE
    from kafkactl.cluster.reassignment_plan import reassignment_throttles

    throttles = reassignment_throttles(plan, current, reassigning)
    for topic in sorted(set(throttles.leader) | set(throttles.follower)):
        configs = {k: v for k, v in ((LEADER_REPLICAS, throttles.leader.get(topic)),
                                     (FOLLOWER_REPLICAS, throttles.follower.get(topic))) if v}
        admin.alter_configs(topic, configs)
    for broker in throttles.brokers:
        admin.alter_configs(str(broker), {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)},
                            resource_type=BROKER_RESOURCE)
    if not quiet:
        typer.echo(f"The inter-broker throttle limit was set to {rate} B/s", err=True)
        typer.echo("Warning: You must run --verify periodically, until the reassignment "
                   "completes, to ensure the throttle is removed.", err=True)


def _topic_throttles(admin: AdminClient, cluster: ClusterMetadata, topic: str) -> list[str]:
    """The throttled-replicas configs `topic` has (a throttled move's), none when it is
    not in the cluster."""
    from kafkactl.broker.replication_quota import FOLLOWER_REPLICAS, LEADER_REPLICAS

    if topic not in cluster.topics or cluster.topics[topic].error_code:
        return []
    entries = admin.describe_configs(topic, [LEADER_REPLICAS, FOLLOWER_REPLICAS])
    return [k for k, e in entries.items() if e.value and not e.is_default]


def _throttled(admin: AdminClient, cluster: ClusterMetadata, topics: list[str]) -> bool:
    """Whether any of `topics` has throttled-replicas configs (a throttled move's)."""
    return any(_topic_throttles(admin, cluster, t) for t in topics)


def _clear_throttles(admin: AdminClient, cluster: ClusterMetadata, topics: list[str],
                     still_moving: Collection[TopicPartition] = ()
                     ) -> tuple[list[int], list[str]]:
    """Remove the two rates from the live brokers and the throttled-replicas configs
    from `topics` that have them: (those brokers, those topics). While reassignments are
    `still_moving` (other plans', started with --additional) the throttles they copy under
    stay: the rates (the same on every broker), and the configs of their topics."""
    from kafkactl.broker.replication_quota import FOLLOWER_RATE, LEADER_RATE
    from kafkactl.client.admin import BROKER_RESOURCE

    brokers: list[int] = []
    moving_topics = {t for t, _ in still_moving}
    topics = [t for t in topics if t not in moving_topics]
    for broker in [] if still_moving else sorted(cluster.brokers):
        entries = admin.describe_configs(str(broker), [LEADER_RATE, FOLLOWER_RATE],
                                         resource_type=BROKER_RESOURCE)
        present = [k for k, e in entries.items() if e.value and e.source == DYNAMIC_BROKER]
        if present:
            admin.alter_configs(str(broker), {}, present, resource_type=BROKER_RESOURCE)
            brokers.append(broker)
    cleared = []
    for topic in topics:
        present = _topic_throttles(admin, cluster, topic)
        if present:
            admin.alter_configs(topic, {}, present)
            cleared.append(topic)
    return brokers, cleared


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise ValueError(f"cannot write the plan to {str(path)!r}: "
                         f"{e.strerror or e}") from None


def _show_plan(plan: dict[TopicPartition, list[int]], current: dict[TopicPartition, list[int]],
               *, execute: bool, as_json: bool, refused: dict[str, str],
               errors: dict[str, str], stranded: dict[str, str] | None = None,
               rollback: dict[TopicPartition, list[int]] | None = None) -> None:
    rows: list[dict[str, Any]] = [
        {"partition": _name(tp), "current": current[tp], "target": target}
        for tp, target in sorted(plan.items())]
    moves = sum(len(set(plan[tp]) - set(current[tp])) for tp in plan)
    leaders = sum(not current[tp] or current[tp][0] != plan[tp][0] for tp in plan)
    if as_json:
        from kafkactl.cluster.reassignment_plan import to_reassignment_json

        doc: dict[str, Any] = {"executed": execute, "moves": rows, "replica_moves": moves,
                               "leader_changes": leaders, "refused": refused,
                               "stranded": stranded or {}, "errors": errors}
        if rollback is not None:
            doc["rollback"] = json.loads(to_reassignment_json(rollback))
        typer.echo(json.dumps(doc, indent=1))
    elif not rows:
        if not errors:  # a refused --plan-in plan moves nothing: only its errors are said
            typer.echo("Nothing to move: every partition's replicas are spread evenly over "
                       "the live brokers already." if not refused and not stranded else
                       "Nothing to move in the topics that could be planned.")
    else:
        from rich.table import Table

        table = Table("PARTITION", "CURRENT REPLICAS", "TARGET REPLICAS",
                      title=f"{len(rows)} partition(s) to change: {moves} replica(s) to "
                            f"copy, {leaders} leader change(s)")
        for r in rows:
            table.add_row(str(r["partition"]), ",".join(map(str, r["current"])),
                          ",".join(map(str, r["target"])))
        print_table(table)
        if not execute:
            typer.echo("Dry run: nothing moved (add --execute).", err=True)


def _verify_or_cancel(bootstrap: str | None, topics: list[str], plan_in: Path | None, *,
                      cancel: bool, as_json: bool, security: Any) -> None:
    """--verify: Kafka's "Status of partition reassignment:" lines (exit 0 only when
    every one is complete; then the replication throttles are removed: the brokers' rates
    and the throttled-replicas configs of the plan's topics, or of -t's, or of every
    topic); --cancel: cancel the reassignments in progress (of the plan, or all of them),
    as kafka-reassign-partitions --cancel."""
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    try:
        wanted = _read_plan(plan_in, topics) if plan_in is not None else None
        with AdminClient(bootstrap, client_id="kafkactl-rebalance",
                         security=security) as admin:
            everything = admin.list_partition_reassignments()
            ongoing = {tp: r for tp, r in everything.items()
                       if not topics or tp[0] in topics}
            cleared: tuple[list[int], list[str]] | None = None
            kept: set[TopicPartition] = set()
            names: list[str] = []
            if cancel:
                chosen = sorted(set(ongoing) & set(wanted) if wanted is not None
                                else ongoing)
                results = admin.alter_partition_reassignments(dict.fromkeys(chosen)) \
                    if chosen else {}
                # as kafka-reassign-partitions --cancel (unless --preserve-throttles): the
                # replication throttles go with the moves (when the moves had some: a
                # broker that does not answer is no reason to wait for an unthrottled one)
                cluster = admin.client.refresh_metadata(None)
                names = sorted({t for t, _ in chosen})
                kept = set(everything) - {tp for tp in chosen if not results.get(tp)}
                if _throttled(admin, cluster, names):
                    _clear_throttles(admin, cluster, names, kept)
            else:
                cluster = admin.client.refresh_metadata(None)
                rows = _verify_rows(cluster, wanted, ongoing)
                if all(r["status"] == "completed" for r in rows):
                    names = sorted({tp[0] for tp in wanted}) if wanted is not None \
                        else _topics(cluster, topics)
                    # another plan's moves still running keep their throttles
                    kept = set(everything)
                    cleared = _clear_throttles(admin, cluster, names, kept)
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None
    if cancel:
        _report_cancel(chosen, results, as_json=as_json)
    else:
        _report_verify(rows, cleared, as_json=as_json, kept=kept, verified_topics=names)


def _report_cancel(chosen: list[TopicPartition], results: dict[TopicPartition, Any], *,
                   as_json: bool) -> None:
    failed = {tp: str(e) for tp, e in results.items() if e}
    done = [tp for tp in chosen if tp not in failed]
    if as_json:
        typer.echo(json.dumps({"cancelled": [_name(tp) for tp in done],
                               "errors": {_name(tp): why for tp, why in failed.items()}},
                              indent=1))
    elif not chosen:
        typer.echo("None of the specified partition reassignments are active.")
    elif done:
        typer.echo(f"Successfully cancelled partition reassignment{'' if len(done) == 1 else 's'}"
                   f" for: {','.join(map(_name, done))}")
    if failed:
        if not as_json:
            typer.echo(f"Error cancelling partition reassignment{'' if len(failed) == 1 else 's'}"
                       " for:", err=True)
            for tp, why in sorted(failed.items()):
                typer.echo(f"{_name(tp)}: {why}", err=True)
        raise typer.Exit(1)


def _verify_rows(cluster: ClusterMetadata, wanted: dict[TopicPartition, list[int]] | None,
                 ongoing: dict[TopicPartition, tuple[list[int], list[int], list[int]]]
                 ) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    targets: dict[TopicPartition, list[int] | None] = (
        dict(wanted) if wanted is not None else dict.fromkeys(ongoing))
    for tp, target in sorted(targets.items()):
        t = cluster.topics.get(tp[0])
        part = t.partitions.get(tp[1]) if t is not None and not t.error_code else None
        current = list(part.replicas) if part is not None else []
        if tp in ongoing:
            status, current = "in_progress", list(ongoing[tp][0])
            line = f"Reassignment of partition {_name(tp)} is still in progress."
        elif target is not None and current == target:
            status = "completed"
            line = f"Reassignment of partition {_name(tp)} is completed."
        else:
            status = "differs"
            line = (f"There is no active reassignment of partition {_name(tp)}, but replica "
                    f"set is {','.join(map(str, current))} rather than "
                    f"{','.join(map(str, target or []))}.")
        rows.append({"partition": _name(tp), "status": status, "current": current,
                     "target": target, "line": line})
    return rows


def _report_verify(rows: list[dict[str, Any]], cleared: tuple[list[int], list[str]] | None,
                   *, as_json: bool, kept: Collection[TopicPartition] = (),
                   verified_topics: Collection[str] = ()) -> None:
    """The status lines; when every one is complete, the throttles removed, and those
    `kept` for the reassignments still in progress (of other plans; their topics among
    `verified_topics` keep their throttled-replicas configs)."""
    keeping = cleared is not None and bool(kept)
    if as_json:
        out: dict[str, Any] = {"partitions": [{k: v for k, v in r.items() if k != "line"}
                                              for r in rows]}
        if cleared is not None and (cleared[0] or cleared[1]):
            out["throttles_cleared"] = {"brokers": cleared[0], "topics": cleared[1]}
        if keeping:
            out["throttles_kept_for"] = [_name(tp) for tp in sorted(kept)]
        typer.echo(json.dumps(out, indent=1))
    else:
        if not rows:
            typer.echo("No partition reassignments found.")
        else:
            typer.echo("Status of partition reassignment:")
            for r in rows:
                typer.echo(r["line"])
        if cleared is not None:
            if cleared[0]:
                typer.echo("Clearing broker-level throttles on brokers "
                           f"{','.join(map(str, cleared[0]))}")
            if cleared[1]:
                typer.echo(f"Clearing topic-level throttles on topic(s) "
                           f"{','.join(cleared[1])}")
            if keeping:
                ones = sorted({t for t, _ in kept} & set(verified_topics))
                typer.echo("Keeping the broker-level throttles"
                           + (f" and the topic-level ones of {','.join(ones)}" if ones else "")
                           + f": other reassignments are still in progress "
                           f"({_names(set(kept))}); --verify removes them once those are "
                           "complete")
    if any(r["status"] != "completed" for r in rows):
        raise typer.Exit(1)


def _wait(admin: AdminClient, moving: set[TopicPartition], timeout: float, *,
          quiet: bool) -> None:
    """Until the moves are done or `timeout` passed, showing how many are (progress on a
    terminal's stderr, redrawn; one line at the end otherwise). Moves still going then
    are no failure (kafka-reassign-partitions does not wait at all): said, exit 0."""
    deadline = time.monotonic() + timeout
    total = len(moving)
    live = sys.stderr.isatty()
    while moving:
        ongoing = set(admin.list_partition_reassignments())
        moving &= ongoing
        if not quiet and (live or not moving):
            typer.echo(f"\r{total - len(moving)} of {total} partition(s) moved", err=True,
                       nl=not moving)
        if not moving:
            return
        if time.monotonic() >= deadline:
            if not quiet:
                typer.echo(("\n" if live else "") + f"{len(moving)} of {total} move(s) still "
                           f"in progress after {timeout:g} s: they go on "
                           "(`rebalance --partitions --verify` shows them and removes the "
                           "throttle once they are done; `--cancel` undoes them)", err=True)
            return
        time.sleep(0.5)


def _partition_meta(cluster: Any, tp: TopicPartition) -> Any:
    """The metadata of a partition, or None when its topic or it is not known."""
    t = cluster.topics.get(tp[0])
    return t.partitions.get(tp[1]) if t is not None and not t.error_code else None


def _preferred_leaders_plan(cluster: Any, wanted: list[tuple[str, int]],
                            as_json: bool) -> None:
    """--preferred-leaders --dry-run: which partitions an election would move, from the
    metadata (the preferred replica is the first of the replicas; it must be in sync), and
    nothing elected."""
    rows: list[dict[str, Any]] = []
    for t, p in sorted(wanted):
        pm = _partition_meta(cluster, (t, p))
        preferred = pm.replicas[0] if pm is not None and pm.replicas else -1
        if pm is None:
            result = NO_SUCH_PARTITION
        elif pm.leader == preferred:
            result = "already preferred"
        elif preferred in pm.isr:
            result = f"would move: leader {pm.leader} -> {preferred}"
        else:
            result = f"would stay: preferred replica {preferred} is not in sync"
        rows.append({"partition": f"{t}-{p}", "leader": pm.leader if pm else None,
                     "preferred": preferred, "result": result})
    if not as_json:
        _dry_run_summary("Preferred", rows, [
            ("would move", lambda r: r["result"].startswith("would move"), True),
            ("already led by their preferred replica",
             lambda r: r["result"] == "already preferred", True),
            ("would stay (preferred replica not in sync)",
             lambda r: r["result"].startswith("would stay"), False)])
    _dry_run_rows(rows, as_json, shown=lambda r: r["result"] != "already preferred")


def _dry_run_summary(kind: str, rows: list[dict[str, Any]],
                     counts: list[tuple[str, Callable[[dict[str, Any]], bool], bool]]) -> None:
    """`<kind> leader election (dry run, nothing elected): N partition(s) <what>, ...`: one
    count per (what, test, always shown), then the partitions no test took (not found)."""
    parts = []
    left = len(rows)
    for i, (what, test, always) in enumerate(counts):
        n = sum(map(test, rows))
        left -= n
        if n or always:
            parts.append(f"{n} partition(s) {what}" if i == 0 else f"{n} {what}")
    if left:
        parts.append(f"{left} not found")
    typer.echo(f"{kind} leader election (dry run, nothing elected): {', '.join(parts)}.")


def _dry_run_rows(rows: list[dict[str, Any]], as_json: bool,
                  shown: Callable[[dict[str, Any]], bool]) -> None:
    """A dry run's partitions: the `shown` ones on stdout (all with --json), a named
    partition that does not exist as an error (exit 1)."""
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
    unknown = [r for r in rows if r["result"] == NO_SUCH_PARTITION]
    for r in rows:
        if r in unknown:
            typer.echo(f"error: {r['partition']}: {NO_SUCH_PARTITION}", err=True)
        elif not as_json and shown(r):
            typer.echo(f"{r['partition']}: {r['result']}")
    if unknown:
        raise typer.Exit(1)


def _wanted(cluster: Any, topics: list[str]) -> list[TopicPartition]:
    """Every partition of `topics` (none: of every topic)."""
    names = _topics(cluster, topics)
    missing = [t for t in names if t not in cluster.topics or cluster.topics[t].error_code]
    if missing:
        raise ValueError(f"topic {missing[0]!r} does not exist")
    return [(t, p) for t in names for p in cluster.topics[t].partitions]


def preferred_leaders(bootstrap: str | None, topics: list[str], *, as_json: bool,
                      security: Any = None, dry_run: bool = False,
                      partitions: list[TopicPartition] | None = None) -> None:
    """Give leadership back to the preferred replicas of `partitions` (None: of every
    partition of `topics`)."""
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    try:
        with AdminClient(bootstrap, client_id="kafkactl-rebalance",
                         security=security) as admin:
            cluster = admin.client.refresh_metadata(None)
            wanted = partitions if partitions is not None else _wanted(cluster, topics)
            if dry_run:
                _preferred_leaders_plan(cluster, wanted, as_json)
                return
            results = admin.elect_preferred_leaders(wanted)
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None
    _report_election(results, "Preferred leader election: {done} partition(s) moved, "
                     "{kept} already led by their preferred replica", "moved",
                     "already preferred", as_json=as_json)


def _report_election(results: dict[TopicPartition, Any], summary: str, done: str,
                     not_needed: str, *, as_json: bool, list_done: str = "") -> None:
    """An ElectLeaders outcome: a partition `done` (elected) or `not_needed`
    (ELECTION_NOT_NEEDED), else the error; exit 1 when any partition failed. The
    `summary` line counts them ({done}, {kept}: not needed; the failed ones follow);
    `list_done` heads a line naming the elected partitions."""
    from kafkactl.protocol.errors import ErrorCode

    rows: list[dict[str, Any]] = []
    failed = False
    for (t, p), err in sorted(results.items()):
        code = ErrorCode.NONE if err is None else err.code
        failed |= code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)
        rows.append({"partition": f"{t}-{p}", "result": (
            done if code == ErrorCode.NONE else not_needed
            if code == ErrorCode.ELECTION_NOT_NEEDED else f"{code.name}: {err}")})
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
    else:
        elected = [r["partition"] for r in rows if r["result"] == done]
        kept = sum(r["result"] == not_needed for r in rows)
        bad = len(rows) - len(elected) - kept
        typer.echo(summary.format(done=len(elected), kept=kept)
                   + (f", {bad} failed." if bad else "."))
        if list_done and elected:
            typer.echo(f"{list_done}: {', '.join(elected)}")
        for r in rows:
            if r["result"] not in (done, not_needed):
                typer.echo(f"error: {r['partition']}: {r['result']}", err=True)
    if failed:
        raise typer.Exit(1)


def _unclean_leaders_plan(cluster: Any, wanted: list[TopicPartition], as_json: bool) -> None:
    """--unclean-leaders --dry-run: which replica each partition without a live leader
    would get, from the metadata (the first live in-sync replica in assignment order,
    else the first live one; a replica listed offline is not live), and nothing elected."""
    rows: list[dict[str, Any]] = []
    for t, p in sorted(wanted):
        pm = _partition_meta(cluster, (t, p))
        row: dict[str, Any] = {"partition": f"{t}-{p}", "leader": None, "elected": None,
                               "in_sync": None}
        live = [] if pm is None else [r for r in pm.replicas if r in cluster.brokers
                                      and r not in (pm.offline_replicas or ())]
        if pm is None:
            row["result"] = NO_SUCH_PARTITION
        elif pm.leader in live:
            row.update(leader=pm.leader, result=f"has a leader ({pm.leader})")
        elif not live:
            row["result"] = "would stay offline: no replica is live"
        else:
            in_sync = [r for r in live if r in pm.isr]
            chosen = (in_sync or live)[0]
            row.update(elected=chosen, in_sync=bool(in_sync), result=(
                f"would elect {chosen} (in sync)" if in_sync else
                f"would elect {chosen}, NOT in sync: records it lacks are lost"))
        rows.append(row)
    if not as_json:
        _dry_run_summary("Unclean", rows, [
            ("would get a leader", lambda r: r["elected"] is not None, True),
            ("already have a live one", lambda r: r["leader"] is not None, True),
            ("would stay offline", lambda r: r["result"].startswith("would stay offline"),
             False)])
    _dry_run_rows(rows, as_json, shown=lambda r: r["leader"] is None)


def unclean_leaders(bootstrap: str | None, partitions: list[TopicPartition] | None, *,
                    as_json: bool, security: Any = None, dry_run: bool = False) -> None:
    """An unclean leader election (KIP-460) of `partitions` (None: every partition of
    every topic, as kafka-leader-election --all-topic-partitions): each one without a live
    leader gets a live replica, in sync if one is, else out of sync (acknowledged records
    it lacks are lost)."""
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    try:
        with AdminClient(bootstrap, client_id="kafkactl-rebalance",
                         security=security) as admin:
            if dry_run:
                cluster = admin.client.refresh_metadata(None)
                wanted = partitions if partitions is not None else _wanted(cluster, [])
                _unclean_leaders_plan(cluster, wanted, as_json)
                return
            if partitions is None:
                # asked of every partition, the brokers leave out those with a leader
                # (as Kafka's): counted here as not needing one
                everything = _wanted(admin.client.refresh_metadata(None), [])
            results = admin.elect_unclean_leaders(partitions)
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None
    if partitions is None:
        from kafkactl.cluster.partition_election import ELECTION_NOT_NEEDED_MESSAGE
        from kafkactl.protocol.errors import ErrorCode, error_for

        for tp in everything:
            results.setdefault(tp, error_for(ErrorCode.ELECTION_NOT_NEEDED)(
                ELECTION_NOT_NEEDED_MESSAGE))
    _report_election(results, "Unclean leader election: {done} partition(s) got a leader, "
                     "{kept} already had a live one", "elected", "has a leader",
                     as_json=as_json, list_done="New leaders for")
