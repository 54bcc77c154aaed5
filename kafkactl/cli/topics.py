"""`kafkactl topics create|list|describe|delete|alter` (kafka-topics) and `topics offsets`
(kafka-get-offsets), through the protocol."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    client_security,
    command_config_option,
    fail,
    parse_key_values,
    property_option,
)

if TYPE_CHECKING:  # the client is imported when a command runs, so --help stays fast
    from kafkactl.client.admin import AdminClient

topics_app = typer.Typer(help="Create, list, describe, alter and delete topics; offsets at a "
                         "time.",
                         no_args_is_help=True)
T = TypeVar("T")


def _run(bootstrap: str | None, prop: list[str], command_config: Path | None,
         fn: Callable[[AdminClient], T]) -> T:
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    security = client_security(prop, command_config)
    try:
        with AdminClient(bootstrap, security=security) as admin:
            return fn(admin)
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None


# what a broker says of a topic whose deletion is not finished (kafkactl: "... is marked for
# deletion; ..." or "... is being deleted ..."; Kafka: "Topic 'T' is marked for deletion.")
PENDING_DELETION = ("marked for deletion", "being deleted")
TOPIC_ALREADY_EXISTS = 36
# `topics delete`: how long a deletion may take to finish before it is said to be pending
DELETION_SETTLE_S = 2.0


def being_deleted(err: Any) -> bool:
    """A CreateTopics error saying the topic is still being deleted."""
    return err is not None and int(err.code) == TOPIC_ALREADY_EXISTS and any(
        phrase in str(err.message) for phrase in PENDING_DELETION)


def refuse_unauthorized(admin: AdminClient, names: list[str]) -> None:
    """Raise TOPIC_AUTHORIZATION_FAILED for the first of `names` the last metadata said
    this principal may not Describe (the broker answers so for a topic it does not let
    the principal see, existing or not), naming the topic as `consume` does."""
    from kafkactl.protocol.errors import ErrorCode, error_for

    for name in names:
        t = admin.client.cluster.topics.get(name)
        if t is not None and t.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            raise error_for(ErrorCode.TOPIC_AUTHORIZATION_FAILED)(
                f"topic {name!r}: TOPIC_AUTHORIZATION_FAILED")


def _raise_errors(results: dict[str, Any], ok_verb: str, *, tolerate: int | None = None) -> None:
    failed = False
    for name, err in results.items():
        if err is None:
            typer.echo(f"{ok_verb} topic {name}.")
        elif tolerate is not None and int(err.code) == tolerate and not being_deleted(err):
            # --if-not-exists: a topic being deleted does not exist, and cannot be made yet
            continue
        else:
            typer.echo(f"error: topic {name}: {err.code.name}: {err.message}", err=True)
            failed = True
    if failed:
        raise typer.Exit(1)


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """kafka-topics' --replica-assignment: partitions separated by commas, each one's
    replicas (broker ids, the first the preferred leader) by colons: `1:2,2:3,3:1` is
    partition 0 on brokers 1 and 2, partition 1 on 2 and 3, partition 2 on 3 and 1.
    Kafka's refusals: a broker twice in a partition, partitions of different sizes."""
    parts = text.split(",")
    while len(parts) > 1 and not parts[-1].strip():  # as Java's split: trailing commas
        parts.pop()
    out: dict[int, list[int]] = {}
    for i, part in enumerate(parts):
        brokers = []
        for b in part.split(":"):
            try:
                brokers.append(int(b.strip()))
            except ValueError:
                raise ValueError(f"bad --replica-assignment {text!r}: {b.strip()!r} is not a "
                                 "broker id (partitions are separated by commas, their "
                                 "replicas by colons: 1:2,2:3,3:1)") from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise ValueError("Partition replica lists may not contain duplicate entries: "
                             + ",".join(map(str, duplicates)))
        out[i] = brokers
        if len(brokers) != len(out[0]):
            raise ValueError(f"Partition {i} has different replication factor: "
                             + ":".join(map(str, brokers)))
    return out


@topics_app.command("create")
def create(
    topic: list[str] = typer.Option(..., "--topic", "-t", help="Topic name (repeatable)."),
    partitions: int | None = typer.Option(None, "--partitions",
                                          help="Partition count (broker default)."),
    replication_factor: int | None = typer.Option(None, "--replication-factor",
                                                  help="Replicas (broker default)."),
    replica_assignment: str | None = typer.Option(
        None, "--replica-assignment", metavar="B:B,B:B,...",
        help="Each partition's replicas, as kafka-topics takes them: partitions separated "
             "by commas, broker ids by colons, the first the preferred leader (1:2,2:3,3:1: "
             "three partitions of two replicas). Not with --partitions or "
             "--replication-factor."),
    config: list[str] = typer.Option([], "--config", help="Topic config k=v (repeatable)."),
    if_not_exists: bool = typer.Option(False, "--if-not-exists",
                                       help="No error if the topic exists."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Create topics."""
    assignment: dict[int, list[int]] | None = None
    if replica_assignment is not None:
        for name, given in (("partitions", partitions),
                            ("replication-factor", replication_factor)):
            if given is not None:  # kafka-topics' words (CommandLineUtils.checkInvalidArgs)
                raise fail(f'Option "[replica-assignment]" can\'t be used with option '
                           f'"[{name}]"', 2)
        try:
            assignment = parse_replica_assignment(replica_assignment)
        except ValueError as e:
            raise fail(str(e), 2) from None
    try:
        cfg = parse_key_values(config, "config")
    except typer.BadParameter as e:
        raise fail(str(e), 2) from None
    counts = (-1 if partitions is None else partitions,
              -1 if replication_factor is None else replication_factor)
    res = _run(bootstrap, prop, command_config, lambda a: a.create_topics(
        {t: (*counts, cfg) for t in topic},
        assignments=None if assignment is None else dict.fromkeys(topic, assignment)))
    _raise_errors(res, "Created", tolerate=36 if if_not_exists else None)


@topics_app.command("list")
def list_(
    exclude_internal: bool = typer.Option(False, "--exclude-internal",
                                          help="Leave out internal topics (__consumer_offsets)."),
    as_json: bool = typer.Option(False, "--json", help="A JSON array of names."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """List topic names."""
    names = _run(bootstrap, prop, command_config, lambda a: a.list_topics(not exclude_internal))
    if as_json:
        typer.echo(json.dumps(list(names)))
        return
    for name in names:
        typer.echo(name)


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def partition_health(p: dict[str, Any], live: set[int], min_isr: int | None) -> set[str]:
    """kafka-topics' partition filters this partition passes: under-replicated (fewer
    in-sync replicas than replicas), unavailable (no leader, or a leader that is not a
    live broker), under-min-isr (no leader, or fewer in-sync replicas than the topic's
    min.insync.replicas), at-min-isr (exactly that many)."""
    has_leader = p["leader"] >= 0
    out = set()
    if len(p["isr"]) < len(p["replicas"]):
        out.add("under_replicated")
    if not has_leader or p["leader"] not in live:
        out.add("unavailable")
    if not has_leader or (min_isr is not None and len(p["isr"]) < min_isr):
        out.add("under_min_isr")
    if min_isr is not None and len(p["isr"]) == min_isr:
        out.add("at_min_isr")
    return out


def replication_factor(partitions: Iterable[Any]) -> int:
    """A topic's replication factor as kafka-topics --describe prints it: its first
    partition's replica count (0 without partitions), even where partitions differ."""
    first = min(partitions, key=lambda p: p.partition, default=None)
    return len(first.replicas) if first is not None else 0


def kafka_uuid(value: Any) -> str | None:
    """A topic id as Kafka's Uuid.toString prints it: its 16 bytes in URL-safe base64
    without padding; None for no id (absent, or the all-zero id of an old broker)."""
    import base64
    raw = getattr(value, "bytes", None)
    if not raw or raw == bytes(16):
        return None
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


# C901: one option per kafka-topics filter, then the two layouts
@topics_app.command("describe")
def describe(  # noqa: C901
    topic: list[str] = typer.Option([], "--topic", "-t", help="Topic (default: all)."),
    under_replicated: bool = typer.Option(
        False, "--under-replicated-partitions",
        help="Only partitions with fewer in-sync replicas than replicas."),
    unavailable: bool = typer.Option(
        False, "--unavailable-partitions",
        help="Only partitions whose leader is not available."),
    under_min_isr: bool = typer.Option(
        False, "--under-min-isr-partitions",
        help="Only partitions with fewer in-sync replicas than min.insync.replicas."),
    at_min_isr: bool = typer.Option(
        False, "--at-min-isr-partitions",
        help="Only partitions with exactly min.insync.replicas in-sync replicas."),
    exclude_internal: bool = typer.Option(False, "--exclude-internal",
                                          help="Without --topic, skip internal topics."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Partitions, leaders, replicas and config overrides, in kafka-topics' layout; the
    --*-partitions filters print only the partitions in that state (as kafka-topics)."""
    wanted = {name for name, on in (("under_replicated", under_replicated),
                                    ("unavailable", unavailable),
                                    ("under_min_isr", under_min_isr),
                                    ("at_min_isr", at_min_isr)) if on}

    def go(a: AdminClient) -> list[dict[str, Any]]:
        docs = []
        live = set(a.client.refresh_metadata([]).brokers)
        topics = a.describe_topics(topic or None)
        refuse_unauthorized(a, list(topics))
        for name, t in topics.items():
            if exclude_internal and not topic and t.is_internal:
                continue
            configs = a.describe_configs(name)
            min_isr = _int_or_none(configs["min.insync.replicas"].value) \
                if "min.insync.replicas" in configs else None
            parts = []
            for p in sorted(t.partitions.values(), key=lambda p: p.partition):
                row: dict[str, Any] = {"partition": p.partition, "leader": p.leader,
                                       "replicas": list(p.replicas), "isr": list(p.isr)}
                if p.offline_replicas:
                    row["offline"] = list(p.offline_replicas)
                health = partition_health(row, live, min_isr)
                if wanted and not health & wanted:
                    continue
                parts.append(row)
            if wanted and not parts:
                continue
            docs.append({
                "topic": name,
                "topic_id": kafka_uuid(t.topic_id),
                "partition_count": len(t.partitions),
                "replication_factor": replication_factor(t.partitions.values()),
                # as kafka-topics: every entry not at its default (ConfigEntry.isDefault), so
                # broker-level settings (static or dynamic) show besides the topic's own
                "configs": {k: c.value for k, c in sorted(configs.items())
                            if not c.is_default},
                "partitions": parts,
            })
        return docs

    docs = _run(bootstrap, prop, command_config, go)
    if as_json:
        typer.echo(json.dumps(docs, indent=1))
        return
    for d in docs:
        if not wanted:  # kafka-topics prints the topic line only without a filter
            overrides = ",".join(f"{k}={v}" for k, v in d["configs"].items())
            topic_id = f"\tTopicId: {d['topic_id']}" if d["topic_id"] else ""
            typer.echo(f"Topic: {d['topic']}{topic_id}\tPartitionCount: "
                       f"{d['partition_count']}\tReplicationFactor: "
                       f"{d['replication_factor']}\tConfigs: {overrides}")
        for p in d["partitions"]:
            leader = p["leader"] if p["leader"] >= 0 else "none"
            line = (f"\tTopic: {d['topic']}\tPartition: {p['partition']}\t"
                    f"Leader: {leader}\t"
                    f"Replicas: {','.join(map(str, p['replicas']))}\t"
                    f"Isr: {','.join(map(str, p['isr']))}")
            if p.get("offline"):
                line += f"\tOffline: {','.join(map(str, p['offline']))}"
            typer.echo(line)


TIME_WORDS = {"earliest": -2, "latest": -1, "max-timestamp": -3}


def parse_time(text: str) -> int:
    """kafka-get-offsets' --time: earliest (-2), latest (-1), max-timestamp (-3), a
    timestamp in ms, or an ISO-8601 date (UTC without a zone, as Kafka's tools read it)."""
    word = TIME_WORDS.get(text.strip().lower())
    if word is not None:
        return word
    bad = typer.BadParameter(
        f"bad --time {text!r}: use earliest (-2), latest (-1), max-timestamp (-3), a "
        "timestamp in ms or an ISO date (YYYY-MM-DDTHH:mm:SS[.sss][Z|+HH:MM], UTC "
        "without a zone)")
    try:
        value = int(text)
    except ValueError:
        from kafkactl.cli.offsets import parse_datetime

        try:
            return parse_datetime(text, "--time")
        except typer.BadParameter:
            raise bad from None
    if value < -3:
        raise bad
    return value


def _partition_list(values: list[str]) -> list[int] | None:
    if not values:
        return None
    try:
        return sorted({int(p) for v in values for p in v.split(",") if p.strip()})
    except ValueError:
        raise typer.BadParameter(f"bad --partition {','.join(values)!r}: expected numbers "
                                 "like 0,2") from None


@topics_app.command("offsets")
def offsets(
    topic: list[str] = typer.Option([], "--topic", "-t",
                                    help="Topic (repeatable; default: every topic)."),
    partition: list[str] = typer.Option([], "--partition", "-p", "--partitions",
                                        help="Only these partitions (repeatable, or 0,2)."),
    time: str = typer.Option("latest", "--time",
                             help="earliest, latest, max-timestamp, a timestamp in ms or an "
                                  "ISO date (2024-05-01T12:00:00[Z|+HH:MM], UTC "
                                  "without a zone): the first offset whose record is at "
                                  "least that new."),
    exclude_internal: bool = typer.Option(False, "--exclude-internal",
                                          help="Without --topic, skip internal topics."),
    as_json: bool = typer.Option(False, "--json", help="A JSON array, one object per "
                                                      "partition."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Offsets of partitions at a time: `topic:partition:offset` lines as
    kafka-get-offsets prints them (the offset is empty when no record is that new)."""
    try:
        ts = parse_time(time)
        parts = _partition_list(partition)
    except typer.BadParameter as e:
        raise fail(str(e), 2) from None

    def go(a: AdminClient) -> dict[tuple[str, int], tuple[int, int]]:
        try:
            return a.topic_offsets(list(topic) or None, parts, ts,
                                   include_internal=not exclude_internal)
        finally:
            # a named topic the principal may not Describe has no partitions in the
            # metadata: refused (this replaces an error about its partitions), not skipped
            refuse_unauthorized(a, list(topic))

    found = _run(bootstrap, prop, command_config, go)
    if as_json:
        typer.echo(json.dumps([{"topic": t, "partition": p,
                                "offset": None if off < 0 else off,
                                "timestamp": None if rts < 0 else rts}
                               for (t, p), (off, rts) in found.items()], indent=1))
        return
    for (t, p), (off, _rts) in found.items():
        typer.echo(f"{t}:{p}:{'' if off < 0 else off}")


@topics_app.command("delete")
def delete(
    topic: list[str] = typer.Option(..., "--topic", "-t", help="Topic (repeatable)."),
    if_exists: bool = typer.Option(False, "--if-exists", help="No error if it is absent."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Delete topics."""
    pending: dict[str, str | None] = {}

    def go(a: AdminClient) -> dict[str, Any]:
        res = a.delete_topics(list(topic))
        pending.update(_deletions_pending(a, [n for n, err in res.items() if err is None]))
        return res

    res = _run(bootstrap, prop, command_config, go)
    failed = False
    for name, err in res.items():
        if err is None and name not in pending:
            typer.echo(f"Deleted topic {name}.")
        elif err is None:
            typer.echo(_pending_line(name, pending[name]))
        elif not (if_exists and int(err.code) == 3):
            typer.echo(f"error: topic {name}: {err.code.name}: {err.message}", err=True)
            failed = True
    if failed:
        raise typer.Exit(1)


def _pending_line(name: str, why: str | None) -> str:
    """What `topics delete` says of a deletion not finished: the controller's reason
    without its repeat of "topic 'T' is marked for deletion" (None: no reason known)."""
    if why is None:
        return f"Topic {name} is marked for deletion."
    lead = f"topic {name!r} is marked for deletion"
    rest = why[len(lead):].lstrip(";.,: ") if why.lower().startswith(lead.lower()) else why
    return f"Topic {name} is marked for deletion, not deleted yet" + \
        (f": {rest}" if rest else ".")


def _deletions_pending(admin: AdminClient, names: list[str]) -> dict[str, str | None]:
    """Of topics whose deletion was accepted, those not deleted yet (name -> why, as the
    controller says it; None: not known). The controller says so when asked, without
    making anything, to create the topic again (CreateTopics validate_only): a topic still
    being deleted is refused as existing. A deletion that finishes within
    DELETION_SETTLE_S is not pending."""
    import time

    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    deadline = time.monotonic() + DELETION_SETTLE_S
    out: dict[str, str | None] = {}
    left = list(names)
    while left:
        try:
            probe = admin.create_topics({n: (1, 1, {}) for n in left}, validate_only=True)
        except (ClientError, KafkaError):
            return {**out, **{n: None for n in left}}  # not known
        still: dict[str, str | None] = {}
        for n in left:
            err = probe.get(n, KafkaError("no answer"))
            if err is None:
                continue  # the name is free: deleted
            if being_deleted(err):
                still[n] = str(err.message)
            else:  # refused otherwise (not authorized to create, no live broker...)
                out[n] = None
        if not still or time.monotonic() >= deadline:
            return {**out, **still}
        left = list(still)
        time.sleep(0.2)
    return out


@topics_app.command("alter")
def alter(
    topic: str = typer.Option(..., "--topic", "-t"),
    partitions: int | None = typer.Option(None, "--partitions",
                                          help="Grow the topic to this many partitions."),
    config: list[str] = typer.Option([], "--config", help="Set k=v (repeatable)."),
    delete_config: list[str] = typer.Option([], "--delete-config",
                                            help="Remove an override (repeatable)."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Add partitions and/or change topic configs."""
    if partitions is None and not config and not delete_config:
        raise fail("nothing to alter: give --partitions, --config or --delete-config", 2)
    try:
        cfg = parse_key_values(config, "config")
    except typer.BadParameter as e:
        raise fail(str(e), 2) from None

    def go(a: AdminClient) -> None:
        from kafkactl.cli.configs import refuse_unset_deletes

        # as `configs alter`: deleting a key the topic does not set is refused ("Invalid
        # config(s): k"), before anything is changed
        refuse_unset_deletes(a, topic, delete_config)
        if partitions is not None:
            _raise_errors(a.create_partitions({topic: partitions}), "Added partitions to")
        if cfg or delete_config:
            a.alter_configs(topic, cfg, delete_config)
            typer.echo(f"Updated config of topic {topic}.")

    _run(bootstrap, prop, command_config, go)


def register(app: typer.Typer) -> None:
    app.add_typer(topics_app, name="topics")
