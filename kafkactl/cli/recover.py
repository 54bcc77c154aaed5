"""`kafkactl recover PATH`: offline repair of a log dir or one partition dir.

Runs the broker's own segment recovery (kafkactl.log.recovery): every batch is validated
(length inside the file, magic, CRC, increasing offsets), each .log is cut at its first
invalid byte and stale indexes are rebuilt. Valid batches are never removed. Exit codes:
0 the log is consistent (now), 1 `--dry-run` found something to repair, 2 it cannot be
repaired (permission denied, a broker holds the dir, not a log dir...).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:  # the log is imported when the command runs, so --help stays fast
    from rich.console import Console

    from kafkactl.log.config import LogConfig
    from kafkactl.log.recovery import SegmentRecoveryReport

EXIT_REPAIRS_NEEDED = 1
EXIT_CANNOT_REPAIR = 2


class RecoverError(Exception):
    """A sentence for the user; exit code 2."""


def partition_dirs(path: Path) -> tuple[Path, list[Path]]:
    """(the log dir holding the `.lock`, the partition dirs to recover) for PATH."""
    from kafkactl.log.manager import is_partition_dir

    if not path.exists():
        raise RecoverError(f"{path} does not exist.")
    if not path.is_dir():
        raise RecoverError(f"{path} is not a directory: give a log dir or a partition dir.")
    if is_partition_dir(path) and _segment_files(path):
        return path.parent, [path]
    dirs = [p for p in sorted(path.iterdir()) if is_partition_dir(p)]
    if not dirs:
        if is_partition_dir(path):
            return path.parent, [path]
        raise RecoverError(
            f"{path} holds no <topic>-<partition> directories and no .log segments; "
            f"give a log dir (log.dirs) or one partition dir."
        )
    return path, dirs


def _segment_files(d: Path) -> list[tuple[int, Path]]:
    from kafkactl.log.segment import LOG_SUFFIX, offset_from_filename

    out = []
    for p in d.iterdir():
        if p.name.endswith(LOG_SUFFIX) and (base := offset_from_filename(p.name)) is not None:
            out.append((base, p))
    return sorted(out)


def recover_partition(d: Path, *, dry_run: bool, config: LogConfig
                      ) -> list[SegmentRecoveryReport]:
    from kafkactl.log.recovery import inspect_segment, recover_segment
    from kafkactl.log.segment import LogSegment

    segments = _segment_files(d)
    reports = []
    for i, (base, path) in enumerate(segments):
        nxt = segments[i + 1][0] if i + 1 < len(segments) else None
        found = inspect_segment(path, index_interval_bytes=config.index_interval_bytes,
                                next_base_offset=nxt)
        if dry_run or (found.bytes_truncated == 0 and not found.indexes_rebuilt):
            reports.append(found)
            continue
        seg = LogSegment(d, base, config, created_ms=0)
        try:
            done = recover_segment(seg, next_base_offset=nxt)
            seg.on_become_inactive()  # final time entry, trimmed indexes: a clean state
            seg.flush()
        finally:
            seg.close()
        done.indexes_rebuilt = True
        reports.append(done)
    return reports


def _needs_repair(r: SegmentRecoveryReport) -> bool:
    return r.bytes_truncated > 0 or r.indexes_rebuilt


def _render(console: Console, rows: list[tuple[str, SegmentRecoveryReport]], dry_run: bool
            ) -> None:
    from rich.table import Table

    title = "kafkactl recover" + (" (dry run: nothing changed)" if dry_run else "")
    table = Table(title=title)
    for col, just in (("partition", "left"), ("segment", "right"), ("valid batches", "right"),
                      ("valid bytes", "right"), ("bytes cut", "right"),
                      ("indexes", "left"), ("first invalid byte", "left")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for part, r in rows:
        cut = r.bytes_truncated
        cut_text = (f"[red]{cut}[/red]" if cut else "0") + (" (would cut)" if cut and dry_run
                                                            else "")
        idx = ("would rebuild" if dry_run else "rebuilt") if r.indexes_rebuilt else "ok"
        problem = f"{r.error_position}: {r.error}" if r.error else ""
        table.add_row(part, str(r.base_offset), str(r.valid_batches), str(r.valid_bytes),
                      cut_text, idx, problem)
    console.print(table)


def recover_command(
    path: Path = typer.Argument(..., help="A log dir (log.dirs entry) or one partition dir."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report only; change nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    index_interval_bytes: int = typer.Option(
        4096, "--index-interval-bytes", min=0,
        help="index.interval.bytes to rebuild indexes with (Kafka's default 4096)."),
) -> None:
    """Validate and repair log segments offline: cut torn or corrupt tails, rebuild indexes."""
    from rich.console import Console

    from kafkactl.log.config import LogConfig
    from kafkactl.log.errors import LogDirInUseError, LogError
    from kafkactl.log.manager import lock_log_dir

    console = Console()
    err = Console(stderr=True, soft_wrap=True)
    config = LogConfig(index_interval_bytes=index_interval_bytes)
    lock_fd: int | None = None
    try:
        log_dir, dirs = partition_dirs(path)
        if not dry_run:
            if not os.access(log_dir, os.W_OK):
                raise RecoverError(
                    f"Cannot repair {path}: permission denied writing to {log_dir}. "
                    f"Run as the user that owns the log dir, or use --dry-run.")
            lock_fd = lock_log_dir(log_dir)
        rows: list[tuple[str, SegmentRecoveryReport]] = []
        for d in dirs:
            for r in recover_partition(d, dry_run=dry_run, config=config):
                rows.append((d.name, r))
    except LogDirInUseError as e:
        err.print(f"[red]error:[/red] {e} Stop the broker before repairing.", highlight=False)
        raise typer.Exit(EXIT_CANNOT_REPAIR) from None
    except PermissionError as e:
        err.print(f"[red]error:[/red] Cannot repair {path}: permission denied on "
                  f"{e.filename or path}. Run as the user that owns the log dir.",
                  highlight=False)
        raise typer.Exit(EXIT_CANNOT_REPAIR) from None
    except (RecoverError, LogError) as e:
        err.print(f"[red]error:[/red] {e}", highlight=False)
        raise typer.Exit(EXIT_CANNOT_REPAIR) from None
    except OSError as e:
        err.print(f"[red]error:[/red] Cannot repair {path}: {e.strerror or e} "
                  f"({e.filename or path}).", highlight=False)
        raise typer.Exit(EXIT_CANNOT_REPAIR) from None
    finally:
        if lock_fd is not None:
            os.close(lock_fd)
    needs = any(_needs_repair(r) for _p, r in rows)
    if as_json:
        doc = {
            "path": str(path), "dry_run": dry_run,
            "consistent": not (dry_run and needs),
            "segments": [{"partition": p, **r.to_dict()} for p, r in rows],
        }
        typer.echo(json.dumps(doc, indent=2))
    else:
        _render(console, rows, dry_run)
        if dry_run and needs:
            console.print("Repairs needed: run again without --dry-run (with the broker "
                          "stopped).")
        elif needs:
            console.print("Repaired: the log is consistent now.")
        else:
            console.print("The log is consistent; nothing to repair.")
    if dry_run and needs:
        raise typer.Exit(EXIT_REPAIRS_NEEDED)


def register(app: typer.Typer) -> None:
    app.command(name="recover")(recover_command)
