"""`kafkactl recover PATH`: offline repair of a log dir or one partition dir.

Runs the broker's own segment recovery (kafkactl.log.repair over kafkactl.log.recovery):
every batch is validated
(length inside the file, magic, CRC, increasing offsets), each .log is cut at its first
invalid byte and stale indexes are rebuilt; each .txnindex is compared with the aborted
transactions the partition's markers say it holds and rewritten when it differs (the
rebuild a broker's recovery does). Valid batches are never removed. The report
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


def _problem(r: SegmentRecoveryReport) -> str:
    """What is wrong with a segment, in one cell: the first invalid byte, else the first
    index problem."""
    if r.error:
        return f"{r.error_position}: {r.error}"
    if r.index_problems:
        more = len(r.index_problems) - 1
        return str(r.index_problems[0]["message"]) + (f" (and {more} more)" if more else "")
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
                      cut_text, idx, _problem(r))
    print_table(table)


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
             "log gets a gap) instead of cutting everything from the first bad byte."),
    show_all: bool = typer.Option(
        False, "--all", help="List every segment, not only those with problems."),
) -> None:
    """Validate and repair log segments offline: cut torn or corrupt tails, rebuild indexes."""
    from rich.console import Console

    from kafkactl.log.config import LogConfig
    from kafkactl.log.errors import LogDirInUseError, LogError
    from kafkactl.log.manager import lock_log_dir
    from kafkactl.log.repair import (
        RepairError,
        needs_repair,
        partition_dirs,
        recover_partition,
        repair_checkpoints,
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
        for d in dirs:
            for r in recover_partition(d, dry_run=dry_run, config=config, salvage=salvage):
                rows.append((d.name, r))
        checkpoints = repair_checkpoints(log_dir, dry_run=dry_run)
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
    needs = any(needs_repair(r) for _p, r in rows) or bool(checkpoints)
    shown = rows if show_all else [(p, r) for p, r in rows if needs_repair(r)]
    if as_json:
        doc = {
            "path": str(path), "dry_run": dry_run,
            "consistent": not (dry_run and needs),
            "partitions_checked": len({p for p, _r in rows}),
            "segments_checked": len(rows),
            "segments": [{"partition": p, **r.to_dict()} for p, r in shown],
            "checkpoints": [c.to_dict() for c in checkpoints],
        }
        typer.echo(json.dumps(doc, indent=2))
    else:
        if shown:
            _render(shown, dry_run)
        typer.echo(_summary(rows, len(shown)))
        for c in checkpoints:
            typer.echo(f"{c.problem} {'Rewrote it' if c.rewritten else 'Would rewrite it'}"
                       f" with its {c.entries_kept} readable entries.")
        if dry_run and needs:
            typer.echo("Repairs needed: run again without --dry-run (with the broker "
                       "stopped).")
        elif needs:
            typer.echo("Repaired: the log is consistent now.")
        else:
            typer.echo("The log is consistent; nothing to repair.")
    if dry_run and needs:
        raise typer.Exit(EXIT_REPAIRS_NEEDED)


def register(app: typer.Typer) -> None:
    app.command(name="recover")(recover_command)
