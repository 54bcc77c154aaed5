"""`kafkactl recover PATH`: offline repair of a log dir or one partition dir.

Runs the broker's own segment recovery (kafkactl.log.repair over kafkactl.log.recovery):
every batch is validated
(length inside the file, magic, CRC, increasing offsets), each .log is cut at its first
invalid byte and stale indexes are rebuilt; each .txnindex is compared with the aborted
transactions the partition's markers say it holds and rewritten when it differs (the
rebuild a broker's recovery does). When a segment is cut, the later segments are deleted
as Kafka's loader deletes them (the log stays contiguous; `--salvage` keeps them, but never
skips a damaged transaction marker: it cuts there as without it): the report names them and
the offsets lost, and says when the cut batch is a transaction marker (its producer's
transaction is then left open: hanging). A segment that lost its .log or its bytes loses
only its own offsets (a gap; the later segments are kept, as Kafka keeps them): the report
names them. A log left ending below its log-start-offset checkpoint is restarted empty
there (as Kafka's loader does), so no offset is handed out twice.
Leftover .deleted/.cleaned/.swap/.tmp files, orphan index files, unreadable producer
snapshots and those above the log end are removed, and epochs, recovery points and high
watermarks above the log end lowered. The report
lists the segments that had problems (`--all`: every segment). Exit codes:
0 the log is consistent (now), 1 `--dry-run` found something to repair, 2 it cannot be
repaired (permission denied, a broker holds the dir, not a log dir...).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from kafkactl.cli._output import print_table

if TYPE_CHECKING:  # the log is imported when the command runs, so --help stays fast
    from kafkactl.log.recovery import SegmentRecoveryReport

EXIT_REPAIRS_NEEDED = 1
EXIT_CANNOT_REPAIR = 2


def _problem(r: SegmentRecoveryReport, dry_run: bool = False) -> str:
    """What is wrong with a segment, in one cell: deleted after a cut, the first invalid
    byte, else the first index problem, else a gap before it."""
    if r.deleted:
        return ("would be deleted" if dry_run else "deleted") + ": it follows the cut"
    if r.error:
        return f"{r.error_position}: {r.error}"
    if r.index_problems:
        more = len(r.index_problems) - 1
        return str(r.index_problems[0]["message"]) + (f" (and {more} more)" if more else "")
    if r.gap_before:
        return f"no segment holds offsets {r.gap_before[0]}..{r.gap_before[1]} before it"
    return ""


def _render(rows: list[tuple[str, SegmentRecoveryReport]], dry_run: bool) -> None:
    from rich.table import Table

    title = "kafkactl recover" + (" (dry run: nothing changed)" if dry_run else "")
    table = Table(title=title)
    for col, just in (("partition", "left"), ("segment", "right"), ("valid batches", "right"),
                      ("valid bytes", "right"), ("bytes cut", "right"),
                      ("indexes", "left"), ("problem", "left")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for part, r in rows:
        cut = r.bytes_truncated
        cut_text = (f"[red]{cut}[/red]" if cut else "0") + (" (would cut)" if cut and dry_run
                                                            else "")
        idx = ("would rebuild" if dry_run else "rebuilt") if r.indexes_rebuilt else "ok"
        table.add_row(part, str(r.base_offset), str(r.valid_batches), str(r.valid_bytes),
                      cut_text, idx, _problem(r, dry_run))
    print_table(table)


def _lost_marker(part: str, r: SegmentRecoveryReport, dry_run: bool, salvage: bool) -> str:
    """What losing a transaction marker (the cut batch's header says it is one) means."""
    m = r.lost_marker or {}
    topic, _sep, number = part.rpartition("-")
    kind = m.get("marker")
    pid, epoch = m.get("producer_id"), m.get("producer_epoch")
    producer = (f"producer {pid} (epoch {epoch if epoch is not None else 'cut off'})"
                if pid is not None else "a producer whose id is cut off with the header")
    what = f"an {kind} marker" if kind == "ABORT" else (
        f"a {kind} marker" if kind else "a transaction marker (its type cannot be read)")
    cut, left = ("would be cut", "would be left") if dry_run else ("was cut", "is left")
    text = (f"{part}: the damaged batch at position {m.get('position')} of "
            f"{Path(r.path).name} (offset {m.get('offset')}) is {what} of {producer}: it "
            f"{cut} with everything after it")
    if salvage:
        text += (", not skipped (skipped, it would leave the producer's later records in "
                 "its next transaction, committed or aborted with it)")
    text += (f". The producer's transaction {left} open (hanging): read_committed "
             "consumers stop at its first offset until it is ended. With the broker "
             f"running, `kafkactl transactions find-hanging --topic {topic or part} "
             f"--partition {number or 0}` lists it and `kafkactl transactions abort` ends it")
    if kind == "COMMIT":
        text += (", which hides records the lost marker had committed (consumers may have "
                 "read them already)")
    return text + "."


def _summary(rows: list[tuple[str, SegmentRecoveryReport]], shown: int) -> str:
    """`Checked 89 partitions (120 segments): 1 segment of 1 partition ...`."""
    from kafkactl.log.repair import needs_repair

    parts = {p for p, _r in rows}
    bad = [(p, r) for p, r in rows if needs_repair(r)]
    text = (f"Checked {len(parts)} partition{'s' * (len(parts) != 1)} "
            f"({len(rows)} segment{'s' * (len(rows) != 1)})")
    if bad:
        bad_parts = {p for p, _r in bad}
        text += (f": {len(bad)} segment{'s' * (len(bad) != 1)} of {len(bad_parts)} "
                 f"partition{'s' * (len(bad_parts) != 1)} had problems")
    if shown < len(rows):
        text += "; --all lists every segment"
    return text + "."


# C901: a command: one check per option, then one report per outcome
def recover_command(  # noqa: C901
    path: Path = typer.Argument(..., help="A log dir (log.dirs entry) or one partition dir."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report only; change nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    index_interval_bytes: int = typer.Option(
        4096, "--index-interval-bytes", min=0,
        help="index.interval.bytes to rebuild indexes with (Kafka's default 4096)."),
    salvage: bool = typer.Option(
        False, "--salvage",
        help="Keep the valid batches after a corrupt region (offsets stay as written: the "
             "log gets a gap) instead of cutting everything from the first bad byte; a "
             "damaged transaction marker is still cut with everything after it."),
    show_all: bool = typer.Option(
        False, "--all", help="List every segment, not only those with problems."),
) -> None:
    """Validate and repair log segments offline: cut torn or corrupt tails, rebuild indexes."""
    from rich.console import Console

    from kafkactl.log.config import LogConfig
    from kafkactl.log.errors import LogDirInUseError, LogError
    from kafkactl.log.manager import lock_log_dir
    from kafkactl.log.repair import (
        PartitionRepair,
        RepairError,
        lower_checkpoints,
        needs_repair,
        partition_dirs,
        repair_checkpoints,
        repair_partition,
    )

    err = Console(stderr=True, soft_wrap=True)
    config = LogConfig(index_interval_bytes=index_interval_bytes)
    lock_fd: int | None = None
    if path.exists() and not path.is_dir():
        err.print(f"[red]error:[/red] {path} is a file, not a partition directory: give a "
                  "log dir (a log.dirs entry) or one <topic>-<partition> directory.",
                  highlight=False)
        raise typer.Exit(EXIT_CANNOT_REPAIR)
    try:
        log_dir, dirs = partition_dirs(path)
        if not dry_run:
            if not os.access(log_dir, os.W_OK):
                raise RepairError(
                    f"Cannot repair {path}: permission denied writing to {log_dir}. "
                    f"Run as the user that owns the log dir, or use --dry-run.")
            lock_fd = lock_log_dir(log_dir)
        rows: list[tuple[str, SegmentRecoveryReport]] = []
        parts: list[PartitionRepair] = []
        for d in dirs:
            part = repair_partition(d, dry_run=dry_run, config=config, salvage=salvage)
            parts.append(part)
            rows += [(d.name, r) for r in part.segments]
        checkpoints = repair_checkpoints(log_dir, dry_run=dry_run)
        checkpoints += lower_checkpoints(
            log_dir, {p.partition: p.log_end_offset for p in parts
                      if p.log_end_offset is not None}, dry_run=dry_run)
    except LogDirInUseError as e:
        err.print(f"[red]error:[/red] {e} Stop the broker before repairing.", highlight=False)
        raise typer.Exit(EXIT_CANNOT_REPAIR) from None
    except PermissionError as e:
        err.print(f"[red]error:[/red] Cannot repair {path}: permission denied on "
                  f"{e.filename or path}. Run as the user that owns the log dir.",
                  highlight=False)
        raise typer.Exit(EXIT_CANNOT_REPAIR) from None
    except (RepairError, LogError) as e:
        err.print(f"[red]error:[/red] {e}", highlight=False)
        raise typer.Exit(EXIT_CANNOT_REPAIR) from None
    except OSError as e:
        err.print(f"[red]error:[/red] Cannot repair {path}: {e.strerror or e} "
                  f"({e.filename or path}).", highlight=False)
        raise typer.Exit(EXIT_CANNOT_REPAIR) from None
    finally:
        if lock_fd is not None:
            os.close(lock_fd)
    needs = any(p.needs_repair for p in parts) or bool(checkpoints)
    shown = rows if show_all else [(p, r) for p, r in rows if needs_repair(r)]
    cuts = [p.cut for p in parts if p.cut is not None]
    lost = [lo for p in parts for lo in p.lost]
    resets = [p.reset for p in parts if p.reset is not None]
    files = [(p.partition, f) for p in parts for f in p.files]
    if as_json:
        doc = {
            "path": str(path), "dry_run": dry_run,
            "consistent": not (dry_run and needs),
            "partitions_checked": len({p for p, _r in rows}),
            "segments_checked": len(rows),
            "segments": [{"partition": p, **r.to_dict()} for p, r in shown],
            "cuts": [c.to_dict() for c in cuts],
            "lost_segments": [lo.to_dict() for lo in lost],
            "log_start_resets": [r.to_dict() for r in resets],
            "files": [{"partition": p, **f.to_dict(dry_run=dry_run)} for p, f in files],
            "checkpoints": [c.to_dict() for c in checkpoints],
        }
        typer.echo(json.dumps(doc, indent=2))
    else:
        if shown:
            _render(shown, dry_run)
        typer.echo(_summary(rows, len(shown)))
        for cut in cuts:
            typer.echo(cut.sentence())
        for gone in lost:
            typer.echo(gone.sentence())
        for reset in resets:
            typer.echo(reset.sentence())
        for repaired in parts:
            if repaired.tail_loss is not None:
                typer.echo(repaired.tail_loss)
        for part_name, r in rows:
            if r.lost_marker is not None and not r.deleted:
                typer.echo(_lost_marker(part_name, r, dry_run, salvage))
        for part_name, f in files:
            done = f.to_dict(dry_run=dry_run)
            target = f" to {Path(str(done['target'])).name}" if done["target"] else ""
            routine = (" (housekeeping: the broker's start-up does it too; no repair)"
                       if f.housekeeping else "")
            typer.echo(f"{part_name}: {f.path.name}: {f.problem}. "
                       f"{str(done['action']).capitalize()} it{target}{routine}.")
        for c in checkpoints:
            if c.lowered:
                typer.echo(f"{c.problem} {'Lowered' if c.rewritten else 'Would lower'} "
                           "them to the log end.")
                continue
            typer.echo(f"{c.problem} {'Rewrote it' if c.rewritten else 'Would rewrite it'}"
                       f" with its {c.entries_kept} readable entries.")
        if dry_run and needs:
            typer.echo("Repairs needed: run again without --dry-run (with the broker "
                       "stopped).")
        elif needs:
            hanging = sum(1 for _p, r in rows if r.lost_marker is not None and not r.deleted)
            typer.echo("Repaired: the log is consistent now" + (
                f"; {hanging} transaction{'s are' if hanging != 1 else ' is'} left open "
                "(see above)." if hanging else "."))
        elif files:
            typer.echo("The log is consistent; nothing to repair (only the housekeeping "
                       "above).")
        else:
            typer.echo("The log is consistent; nothing to repair.")
    if dry_run and needs:
        raise typer.Exit(EXIT_REPAIRS_NEEDED)


def register(app: typer.Typer) -> None:
    app.command(name="recover")(recover_command)
