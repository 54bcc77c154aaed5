"""The loader's output commit: staging, the offsets manifest, publishing, and recovery.

Layout of an output directory (Spark skips names starting with `_` when reading it):

    OUT/topic=T/partition=P/<run>-part-....parquet   published data
    OUT/_kafkactl/offsets.json                        the committed end offsets and run id
    OUT/_kafkactl/staging/<run>/data/...              a run's Spark output before publishing
    OUT/_kafkactl/staging/<run>/_publish.json         that run's files and offsets
    OUT/_kafkactl/lock                                held (flock) while a loader runs

A run (1) writes its data to its own staging directory, (2) lists the files in
`_publish.json`, (3) commits its end offsets (offsets.json replaced atomically, or the
consumer group's offsets), (4) renames its files into place and drops the staging directory.
Before planning, the next run finishes the publishing of a committed run that was killed in
(4) and deletes the staging directory of any run that never reached (3). Every record is
thus published exactly once: by the run whose commit covers it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TopicPartition = tuple[str, int]
MANIFEST_VERSION = 1


class OutputError(OSError):
    """The output directory cannot be used (not writable, locked by another loader)."""


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


def offsets_to_json(offsets: dict[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (t, p), off in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = off
    return out


def offsets_from_json(doc: dict[str, dict[str, int]]) -> dict[TopicPartition, int]:
    return {(t, int(p)): int(off) for t, parts in doc.items() for p, off in parts.items()}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomically(path: Path, doc: Any) -> None:
    """Write to a temp file, fsync, rename over `path`, fsync the directory."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


@dataclass
class StagedRun:
    run: str
    start: dict[TopicPartition, int]
    end: dict[TopicPartition, int]
    files: list[str] = field(default_factory=list)  # relative to the staging data dir
    records: int = 0


class OutputDir:
    """One loader output directory and its commit protocol (local or mounted filesystem)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).absolute()
        self.meta = self.root / "_kafkactl"
        self.staging_root = self.meta / "staging"
        self.manifest_path = self.meta / "offsets.json"

    # -- setup -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Create the layout and hold the loader lock; OutputError if either fails."""
        try:
            self.staging_root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.meta / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise OutputError(f"output {self.root} is not writable: "
                              f"{e.strerror or e}") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OutputError(f"output {self.root} is locked by another running "
                                  "loader") from None
            probe = self.meta / f".probe-{os.getpid()}"
            try:
                probe.write_bytes(b"")
                probe.unlink()
            except OSError as e:
                raise OutputError(f"output {self.root} is not writable: "
                                  f"{e.strerror or e}") from None
            yield
        finally:
            os.close(fd)

    def staging(self, run: str) -> Path:
        return self.staging_root / run

    def data_dir(self, run: str) -> Path:
        return self.staging(run) / "data"

    # -- the manifest ----------------------------------------------------------------------

    def read_manifest(self) -> dict[str, Any] | None:
        try:
            doc: dict[str, Any] = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        if doc.get("version") != MANIFEST_VERSION:
            raise OutputError(f"{self.manifest_path}: unknown manifest version "
                              f"{doc.get('version')!r}")
        return doc

    def committed_offsets(self) -> dict[TopicPartition, int]:
        doc = self.read_manifest()
        return {} if doc is None else offsets_from_json(doc["offsets"])

    def write_manifest(self, staged: StagedRun) -> None:
        offsets = self.committed_offsets()
        offsets.update(staged.end)
        write_json_atomically(self.manifest_path, {
            "version": MANIFEST_VERSION, "run": staged.run,
            "offsets": offsets_to_json(offsets),
            "run_start": offsets_to_json(staged.start), "records": staged.records,
            "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        })

    # -- staging and publishing ------------------------------------------------------------

    def list_files(self, staged: StagedRun) -> None:
        """The run's Spark output files (after Spark's job commit)."""
        data = self.data_dir(staged.run)
        staged.files = sorted(str(p.relative_to(data)) for p in data.rglob("*.parquet"))

    def seal(self, staged: StagedRun) -> None:
        """Record the run's files and offsets in _publish.json."""
        write_json_atomically(self.staging(staged.run) / "_publish.json", {
            "run": staged.run, "files": staged.files, "records": staged.records,
            "start": offsets_to_json(staged.start), "end": offsets_to_json(staged.end)})

    def read_sealed(self, run: str) -> StagedRun | None:
        try:
            doc = json.loads((self.staging(run) / "_publish.json").read_text("utf-8"))
        except FileNotFoundError:
            return None
        return StagedRun(run, offsets_from_json(doc["start"]), offsets_from_json(doc["end"]),
                         list(doc["files"]), int(doc.get("records", 0)))

    def publish(self, staged: StagedRun, on_first: Callable[[], None] | None = None) -> None:
        """Rename the run's files into place (idempotent), then drop its staging dir.
        `on_first` runs after the first rename (fault injection in the tests)."""
        data = self.data_dir(staged.run)
        dirs: set[Path] = set()
        for rel in staged.files:
            src = data / rel
            dst = self.root / Path(rel).parent / f"{staged.run}-{Path(rel).name}"
            if not src.exists():
                if dst.exists():
                    continue  # published before a crash
                raise OutputError(f"staged file {src} of committed run {staged.run} is "
                                  "missing; the output needs repair")
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
            dirs.add(dst.parent)
            if on_first is not None:
                on_first()
                on_first = None
        for d in dirs:
            _fsync_dir(d)
        shutil.rmtree(self.staging(staged.run))

    def recover(self, committed: dict[TopicPartition, int]) -> list[str]:
        """Finish publishing a committed run; delete uncommitted staging. Returns notes."""
        notes = []
        for d in sorted(self.staging_root.iterdir()) if self.staging_root.exists() else ():
            if not d.is_dir():
                continue
            staged = self.read_sealed(d.name)
            if staged is not None and staged.end and all(
                    committed.get(tp) == off for tp, off in staged.end.items()):
                self.publish(staged)
                notes.append(f"finished publishing committed run {d.name}")
            else:
                shutil.rmtree(d)
                notes.append(f"removed the output of unfinished run {d.name}")
        return notes
