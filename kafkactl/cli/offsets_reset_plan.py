"""The offsets `kafkactl offsets reset` plans (kafka-consumer-groups --reset-offsets): the
partitions in scope (--topic, --all-topics, or the rows of --from-file) and each one's new
offset by the scenario asked for, clamped to the log as Kafka's GroupOffsetsResetter does;
also Kafka's reset-plan CSV (--export writes it, --from-file reads it) and its ISO-8601
--by-duration."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from kafkactl.client.consumer import SimpleConsumer
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient

TopicPartition = tuple[str, int]
# a scenario: its kind and its value (an offset, a shift, a timestamp in ms; 0 if none)
Spec = tuple[str, int]

# java.time.Duration.parse: [-+]PnDTnHnMn.nS, any component may be signed, T needs a field
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE)


def parse_duration(text: str) -> int:
    """An ISO-8601 duration as Java's Duration.parse reads it (`P1DT2H`, `PT15M`,
    `PT0.5S`) -> milliseconds."""
    m = _DURATION.fullmatch(text.strip())
    if (m is None or not any(m.group(i) for i in (2, 3, 4, 5))
            or (("T" in text.upper()) and not any(m.group(i) for i in (3, 4, 5)))):
        raise typer.BadParameter(f"bad --by-duration {text!r}: expected an ISO-8601 "
                                 "duration PnDTnHnMnS (e.g. PT1H30M, P1D)")
    sign, days, hours, minutes, seconds, frac = m.groups()
    ms = (int(days or 0) * 86400_000 + int(hours or 0) * 3600_000
          + int(minutes or 0) * 60_000)
    secs = int(seconds or 0)
    frac_ms = int((frac or "0").ljust(3, "0")[:3])
    ms += secs * 1000 + (-frac_ms if (seconds or "").startswith("-") else frac_ms)
    return -ms if sign == "-" else ms


def duration_timestamp(duration_ms: int) -> int:
    """--by-duration's timestamp: now minus the duration (Kafka's resetByDuration)."""
    return int(time.time() * 1000) - duration_ms


def read_plan_csv(path: Path, group: str) -> dict[TopicPartition, int]:
    """Kafka's reset plan CSV: `topic,partition,offset` per line (what --export writes for
    one group), or `group,topic,partition,offset` (only `group`'s lines are taken)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise typer.BadParameter(f"--from-file {path}: {e}") from None
    plan: dict[TopicPartition, int] = {}
    other_groups = False
    for n, line in enumerate(text.splitlines(), 1):
        fields = [f.strip() for f in line.split(",")]
        if fields == [""]:
            continue
        if len(fields) == 4:
            if fields[0] != group:
                other_groups = True
                continue
            fields = fields[1:]
        try:
            if len(fields) != 3 or not fields[0]:
                raise ValueError
            tp, offset = (fields[0], int(fields[1])), int(fields[2])
            if tp[1] < 0:
                raise ValueError
        except ValueError:
            raise typer.BadParameter(f"--from-file {path} line {n}: {line.strip()!r}: "
                                     "expected TOPIC,PARTITION,OFFSET (or GROUP,TOPIC,"
                                     "PARTITION,OFFSET)") from None
        if tp in plan and plan[tp] != offset:
            raise typer.BadParameter(f"--from-file {path} line {n}: {tp[0]}-{tp[1]} is "
                                     "given twice with different offsets")
        plan[tp] = offset
    if not plan:
        raise typer.BadParameter(f"--from-file {path}: no reset plan for group {group}"
                                 + (" (its lines name other groups)" if other_groups else ""))
    return plan


def export_csv(plan: dict[TopicPartition, int]) -> str:
    """The plan as Kafka's --export writes it for one group: `topic,partition,offset`."""
    return "".join(f"{t},{p},{o}\n" for (t, p), o in sorted(plan.items()))


def _partitions_in_scope(client: KafkaClient, simple: SimpleConsumer, group: str,
                         topics: list[tuple[str, list[int] | None]],
                         committed: dict[TopicPartition, int]) -> list[TopicPartition]:
    """--topic's partitions (each must exist); else every partition the group has a
    committed offset of (--all-topics), less those of topics deleted since (a warning)."""
    from kafkactl.cli.offsets import _warn_stale, missing_partitions

    if topics:
        cluster = client.ensure_topics(sorted({t for t, _ in topics}), allow_auto_create=False)
        tps = []
        for t, parts in topics:
            known = sorted(cluster.topics[t].partitions)
            for p in parts if parts is not None else known:
                if p not in known:
                    raise ValueError(f"topic {t} has no partition {p}")
                tps.append((t, p))
        return tps
    tps = sorted(tp for tp, o in committed.items() if o >= 0)
    stale = missing_partitions(simple, tps)
    if stale:  # a deleted topic's offsets: nothing to reset them to
        _warn_stale(group, stale, "its committed offsets are not reset")
        tps = [tp for tp in tps if tp not in stale]
        if not tps:
            raise ValueError(f"group {group!r} has committed offsets only of topics "
                             "that do not exist")
    if not tps:
        raise ValueError(f"group {group!r} has no committed offsets; name the partitions "
                         "with --topic")
    return tps


def plan_reset(client: KafkaClient, admin: GroupAdmin, simple: SimpleConsumer, group: str,
               topics: list[tuple[str, list[int] | None]], spec: Spec,
               from_file: dict[TopicPartition, int] | None = None
               ) -> dict[TopicPartition, int]:
    """The new offset of each partition in scope (of `from_file`'s when given)."""
    from kafkactl.cli.offsets import missing_partitions
    from kafkactl.client.fetcher import EARLIEST, LATEST

    committed = {tp: o for tp, o in admin.fetch_offsets(group).items() if o >= 0}
    if from_file is not None:
        tps = sorted(from_file)
        gone = missing_partitions(simple, tps)
        if gone:  # Kafka's checkAllTopicPartitionsValid
            raise ValueError("The partitions " + ", ".join(
                f"{t}-{p}" for t, p in sorted(gone)) + " do not exist")
    else:
        tps = _partitions_in_scope(client, simple, group, topics, committed)
    lo = {tp: v[0] for tp, v in simple.list_offsets({tp: EARLIEST for tp in tps}).items()}
    hi = {tp: v[0] for tp, v in simple.list_offsets({tp: LATEST for tp in tps}).items()}
    kind, value = spec
    out: dict[TopicPartition, int] = {}
    if kind in ("datetime", "duration"):
        found = simple.list_offsets({tp: value for tp in tps})
    for tp in tps:
        if kind == "earliest":
            new = lo[tp]
        elif kind == "latest":
            new = hi[tp]
        elif kind == "offset":
            new = value
        elif kind == "file":
            assert from_file is not None
            new = from_file[tp]
        elif kind == "current":
            # as Kafka's resetToCurrent: the committed offset as it is (not clamped), the
            # log end offset for a partition with none
            out[tp] = committed.get(tp, hi[tp])
            continue
        elif kind == "shift":
            cur = committed.get(tp, -1)
            if cur < 0:
                raise ValueError(f"{tp[0]}-{tp[1]} has no committed offset to shift")
            new = cur + value
        else:  # datetime, duration: no record at or after the time: the log end offset
            new = found[tp][0]
            if new < 0:
                typer.echo(f"warning: Partition {tp[1]} from topic {tp[0]} is empty. "
                           "Falling back to latest known offset.", err=True)
                new = hi[tp]
        out[tp] = in_range(tp, new, lo[tp], hi[tp], warn=kind in ("offset", "shift", "file"))
    return out


def in_range(tp: TopicPartition, offset: int, lo: int, hi: int, *, warn: bool) -> int:
    """`offset` clamped to the log, saying so as Kafka's checkOffsetsRange does (for an
    offset given, shifted to or read from a file)."""
    if offset > hi:
        if warn:
            typer.echo(f"warning: New offset ({offset}) is higher than latest offset for "
                       f"topic partition {tp[0]}-{tp[1]}. Value will be set to {hi}", err=True)
        return hi
    if offset < lo:
        if warn:
            typer.echo(f"warning: New offset ({offset}) is lower than earliest offset for "
                       f"topic partition {tp[0]}-{tp[1]}. Value will be set to {lo}", err=True)
        return lo
    return offset
