"""Disk errors under the log layer, produced by the real kernel: a small tmpfs that fills
up (ENOSPC, also for inodes) and RLIMIT_FSIZE with SIGXFSZ ignored (a short write, then
EFBIG). A failed append changes nothing (file size, indexes, log end offset), a retry
appends at the same offsets, and the log reopens valid with or without recovery."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkactl.log.config import LogConfig
from kafkactl.log.errors import KafkaStorageError
from kafkactl.log.log import Log
from kafkactl.log.manager import CLEAN_SHUTDOWN_MARKER, LogManager
from kafkactl.log.segment import INDEX_RESERVE_ENTRIES
from kafkactl.record.memory_records import scan
from tests.log.helpers import SMALL, FakeTime, assert_indexes_agree, fill, make_batch

REPO = Path(__file__).resolve().parents[2]

MountTmpfs = Callable[..., Path]


@pytest.fixture
def mount_tmpfs(tmp_path: Path) -> Iterator[MountTmpfs]:
    """mount_tmpfs(size, nr_inodes=None) -> a fresh tmpfs (unmounted after the test)."""
    mounted: list[Path] = []

    def mount(size: int, nr_inodes: int | None = None) -> Path:
        mnt = tmp_path / f"tmpfs-{len(mounted)}"
        mnt.mkdir()
        opts = f"size={size}" + (f",nr_inodes={nr_inodes}" if nr_inodes else "")
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mnt)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs (needs root / CAP_SYS_ADMIN): "
                        f"{proc.stderr.strip() or proc.returncode}")
        mounted.append(mnt)
        return mnt

    yield mount
    for mnt in mounted:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill_disk(mnt: Path) -> Path:
    """Write a ballast file until the file system is full."""
    ballast = mnt / "ballast"
    chunk = b"\xee" * 65536
    with open(ballast, "ab", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(chunk)
        with contextlib.suppress(OSError):
            while True:  # the last partial page
                f.write(b"\xee")
    assert os.statvfs(mnt).f_bavail == 0
    return ballast


def use_up_inodes(mnt: Path, leave: int) -> list[Path]:
    made: list[Path] = []
    while os.statvfs(mnt).f_favail > leave:
        p = mnt / f"inode-{len(made)}"
        p.touch()
        made.append(p)
    return made


def state(log: Log) -> tuple:
    """Everything an append must not change when it fails."""
    seg = log.active_segment
    return (log.log_end_offset, len(log.segments), seg.base_offset, seg.size,
            os.stat(seg.log_path).st_size, seg.offset_index.entry_count,
            seg.time_index.entry_count, seg.max_timestamp_so_far, sorted(os.listdir(log.dir)))


def assert_valid_and_complete(log: Log, expected_bases: list[int]) -> None:
    bases = []
    for seg in log.segments:
        data = seg.read_bytes(0, seg.size)
        result = scan(memoryview(data), expected_offset=seg.base_offset)
        assert result.error is None and result.valid_bytes == seg.size == os.stat(
            seg.log_path).st_size
        assert_indexes_agree(seg)
    bases = [b.base_offset for b in log.iter_batches()]
    assert bases == expected_bases
    assert all(b.is_valid() for b in log.iter_batches())


def reopen_both_ways(log_dir: Path, cfg: LogConfig, clock: FakeTime,
                     expected_bases: list[int]) -> None:
    leo = expected_bases[-1] + 3 if expected_bases else 0
    for needs_recovery in (False, True):
        log = Log(log_dir, cfg, time=clock, needs_recovery=needs_recovery)
        try:
            assert log.log_end_offset == leo
            assert all(r.error is None for r in log.recovery_reports)
            assert_valid_and_complete(log, expected_bases)
        finally:
            log.close()


BIG = 5000  # a batch bigger than any page the .log may still have room in


def fill_until_roll_is_due(log: Log) -> list[int]:
    """Append until the next batch (make_batch(3)) no longer fits in the active segment."""
    bases = []
    n = len(make_batch(3))
    while log.active_segment.size + n <= log.config.segment_bytes:
        bases.append(log.append(make_batch(3, ts=1_000 + len(bases))).first_offset)
    return bases


@pytest.mark.parametrize("as_type", [bytearray, bytes], ids=["one-batch-path", "general-path"])
def test_full_disk_append_changes_nothing_and_retry_lands_at_same_offset(
        mount_tmpfs: MountTmpfs, clock: FakeTime, as_type: type) -> None:
    mnt = mount_tmpfs(256 * 1024)
    cfg = dataclasses.replace(SMALL, segment_index_bytes=8192)
    log = Log(mnt / "orders-0", cfg, time=clock)
    bases = fill(log, 20)
    ballast = fill_disk(mnt)
    before = state(log)
    for _ in range(3):
        with pytest.raises(KafkaStorageError) as info:
            log.append(as_type(make_batch(3, ts=9_000, value_size=BIG)))
        assert info.value.code == 56 and info.value.errno == errno.ENOSPC
        assert info.value.log_dir == mnt
        assert "No space left on device" in str(info.value) and "orders-0" in str(info.value)
        assert state(log) == before
    assert_valid_and_complete(log, bases)
    ballast.unlink()
    retry = log.append(as_type(make_batch(3, ts=9_000, value_size=BIG)))
    assert retry.first_offset == before[0]
    bases.append(retry.first_offset)
    bases += fill(log, 2, ts0=10_000)
    assert_valid_and_complete(log, bases)
    log.close()
    reopen_both_ways(mnt / "orders-0", cfg, clock, bases)


def test_general_path_multi_batch_append_is_all_or_nothing(mount_tmpfs: MountTmpfs,
                                                           clock: FakeTime) -> None:
    mnt = mount_tmpfs(256 * 1024)
    log = Log(mnt / "orders-0", SMALL, time=clock)
    bases = fill(log, 5)
    ballast = fill_disk(mnt)
    before = state(log)
    two = make_batch(3, ts=5_000) + make_batch(3, ts=5_001, value_size=BIG)
    with pytest.raises(KafkaStorageError):
        log.append(two)
    assert state(log) == before
    ballast.unlink()
    info = log.append(two)
    assert (info.first_offset, info.last_offset) == (before[0], before[0] + 5)
    assert_valid_and_complete(log, [*bases, before[0], before[0] + 3])
    log.close()


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """RLIMIT_FSIZE for this process with SIGXFSZ ignored: writes past `limit` bytes come
    back short, then fail with EFBIG."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)


def test_short_write_then_efbig_is_cut_off(log_dir: Path, clock: FakeTime) -> None:
    log = Log(log_dir, SMALL, time=clock)
    bases = fill(log, 10)
    before = state(log)
    batch = make_batch(3, ts=9_000, value_size=300)
    # the kernel writes part of the batch, then refuses the rest
    limit = log.active_segment.size + len(batch) // 2
    with file_size_limit(limit), pytest.raises(KafkaStorageError) as info:
        log.append(bytearray(batch))
    assert info.value.errno == errno.EFBIG
    assert state(log) == before
    retry = log.append(bytearray(batch))
    assert retry.first_offset == before[0]
    assert_valid_and_complete(log, [*bases, retry.first_offset])
    log.close()
    reopen_both_ways(log_dir, SMALL, clock, [*bases, retry.first_offset])


def test_roll_whose_index_files_cannot_be_sized_leaves_no_segment(log_dir: Path,
                                                                  clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, segment_bytes=2048, segment_index_bytes=64 * 1024)
    log = Log(log_dir, cfg, time=clock)
    bases = fill_until_roll_is_due(log)
    before = state(log)
    # the new segment's .log fits, its preallocated indexes (64 KiB) do not
    with file_size_limit(32 * 1024), pytest.raises(KafkaStorageError) as info:
        log.append(bytearray(make_batch(3, ts=9_000)))
    assert info.value.errno == errno.EFBIG
    assert state(log) == before  # same segments, no half-made files
    info2 = log.append(bytearray(make_batch(3, ts=9_000)))
    assert info2.first_offset == before[0] and len(log.segments) == 2
    assert log.active_segment.base_offset == before[0]
    assert_valid_and_complete(log, [*bases, before[0]])
    log.close()
    reopen_both_ways(log_dir, cfg, clock, [*bases, before[0]])


@pytest.mark.parametrize("free_inodes", [0, 1, 2])
def test_roll_that_cannot_create_its_files_leaves_no_half_made_segment(
        mount_tmpfs: MountTmpfs, clock: FakeTime, free_inodes: int) -> None:
    mnt = mount_tmpfs(1024 * 1024, nr_inodes=64)
    cfg = dataclasses.replace(SMALL, segment_bytes=2048)
    log = Log(mnt / "orders-0", cfg, time=clock)
    bases = fill_until_roll_is_due(log)
    before = state(log)
    spent = use_up_inodes(mnt, free_inodes)  # room for .log (1) or .log + .index (2)
    with pytest.raises(KafkaStorageError) as info:
        log.append(bytearray(make_batch(3, ts=9_000)))
    assert info.value.errno == errno.ENOSPC
    assert state(log) == before
    for p in spent:
        p.unlink()
    again = log.append(bytearray(make_batch(3, ts=9_000)))
    assert again.first_offset == before[0] and len(log.segments) == 2
    assert_valid_and_complete(log, [*bases, before[0]])
    log.close()
    reopen_both_ways(mnt / "orders-0", cfg, clock, [*bases, before[0]])


def test_disk_fills_across_rolls(mount_tmpfs: MountTmpfs, clock: FakeTime) -> None:
    """Append until the disk is full with small segments (rolls on the way), retry a few
    times, free space, go on: every acknowledged batch is there once."""
    mnt = mount_tmpfs(192 * 1024)
    cfg = dataclasses.replace(SMALL, segment_bytes=16 * 1024, segment_index_bytes=4096)
    log = Log(mnt / "orders-0", cfg, time=clock)
    with open(mnt / "ballast", "wb") as f:
        f.write(b"\xee" * (96 * 1024))
    bases: list[int] = []
    failures = 0
    ts = 1_000
    while failures < 5:
        try:
            bases.append(log.append(bytearray(make_batch(3, ts=ts, value_size=700))).first_offset)
            ts += 1
        except KafkaStorageError as e:
            assert e.errno == errno.ENOSPC
            assert log.log_end_offset == (bases[-1] + 3 if bases else 0)
            failures += 1
    assert len(log.segments) > 2
    assert_valid_and_complete(log, bases)
    (mnt / "ballast").unlink()
    bases += fill(log, 10, ts0=ts)
    assert_valid_and_complete(log, bases)
    log.close()
    reopen_both_ways(mnt / "orders-0", cfg, clock, bases)


def _index_page_scenario(root: str) -> None:
    """Run in a child process (a regression kills it with SIGBUS, not pytest): batches
    indexed one by one until the next index entry needs index pages the disk has no room
    for, while the .log still has room in its last page."""
    mnt = Path(root)
    cfg = LogConfig(segment_index_bytes=64 * 1024, index_interval_bytes=0)
    log = Log(mnt / "orders-0", cfg, time=FakeTime())
    size = next(len(b) for v in range(1, 200)
                if (b := make_batch(1, value_size=v))
                and (INDEX_RESERVE_ENTRIES + 1) * len(b) % 4096 <= 4096 - len(b))
    value = size - len(make_batch(1, value_size=0))
    bases = [log.append(bytearray(make_batch(1, ts=1_000 + i, value_size=value))).first_offset
             for i in range(INDEX_RESERVE_ENTRIES + 1)]
    seg = log.active_segment
    assert seg.offset_index.entry_count == INDEX_RESERVE_ENTRIES
    ballast = fill_disk(mnt)
    before = state(log)
    try:
        log.append(bytearray(make_batch(1, ts=5_000, value_size=value)))
    except KafkaStorageError as e:
        assert e.errno == errno.ENOSPC
    else:
        raise AssertionError("the append needed new index pages on a full disk")
    assert state(log) == before
    ballast.unlink()
    bases.append(log.append(bytearray(make_batch(1, ts=5_000, value_size=value))).first_offset)
    assert seg.offset_index.entry_count == INDEX_RESERVE_ENTRIES + 1
    log.close()
    log = Log(mnt / "orders-0", cfg, time=FakeTime(), needs_recovery=True)
    assert [b.base_offset for b in log.iter_batches()] == bases
    assert_indexes_agree(log.active_segment)
    log.close()
    print("ok")


def _reopen_full_scenario(root: str) -> None:
    """Run in a child process: a log left open (as by kill -9) on a disk that is full,
    opened again with recovery while the disk is still full. The active segment's
    preallocated index tail is a hole, and on tmpfs even reading a hole through the mmap
    needs a page."""
    mnt = Path(root)
    cfg = dataclasses.replace(SMALL, segment_bytes=64 * 1024, segment_index_bytes=16384,
                              index_interval_bytes=4096)
    crashed = Log(mnt / "orders-0", cfg, time=FakeTime())
    with open(mnt / "ballast", "wb") as f:
        f.write(b"\xee" * (256 * 1024))
    bases = []
    with contextlib.suppress(KafkaStorageError):
        while True:
            bases.append(crashed.append(
                bytearray(make_batch(4, ts=1_000 + len(bases), value_size=500))).first_offset)
    assert len(crashed.segments) > 1
    log = Log(mnt / "orders-0", cfg, time=FakeTime(), needs_recovery=True)
    assert [b.base_offset for b in log.iter_batches()] == bases
    with pytest.raises(KafkaStorageError):
        log.append(bytearray(make_batch(4, value_size=BIG)))
    (mnt / "ballast").unlink()
    assert log.append(bytearray(make_batch(4))).first_offset == bases[-1] + 4
    log.close()
    print("ok")


@pytest.mark.parametrize("scenario", ["_index_page_scenario", "_reopen_full_scenario"])
def test_full_disk_is_an_error_not_sigbus(mount_tmpfs: MountTmpfs, scenario: str) -> None:
    mnt = mount_tmpfs(512 * 1024)
    proc = subprocess.run(
        [sys.executable, "-c", f"import sys; from tests.log.test_disk_errors import "
         f"{scenario} as s; s(sys.argv[1])", str(mnt)],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (
        f"exit {proc.returncode} (-7 = SIGBUS)\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")


def test_manager_checkpoint_and_shutdown_on_a_full_dir(mount_tmpfs: MountTmpfs,
                                                       tmp_path: Path,
                                                       clock: FakeTime) -> None:
    """A dir with no space and no inodes left: checkpoints fail there (reported, the other
    dir still gets its files), shutdown still completes and releases the locks, the full
    dir gets no clean-shutdown marker, and the next load recovers it intact."""
    full = mount_tmpfs(256 * 1024, nr_inodes=64)
    ok = tmp_path / "ok-dir"
    m = LogManager([ok, full], SMALL, time=clock)
    m.load()
    a = m.create_log("a", 0)  # least loaded first: `ok`
    b = m.create_log("b", 0)  # then `full`
    assert b.dir.parent == full and a.dir.parent == ok
    fill(a, 5)
    fill(b, 5)
    fill_disk(full)
    use_up_inodes(full, 0)
    with pytest.raises(KafkaStorageError):
        b.append(bytearray(make_batch(3, value_size=BIG)))
    assert m.checkpoint() == [full]
    assert not [p for p in full.iterdir() if p.name.endswith(".tmp")]
    assert (ok / "recovery-point-offset-checkpoint").exists()
    m.shutdown()
    assert (ok / CLEAN_SHUTDOWN_MARKER).exists()
    assert not (full / CLEAN_SHUTDOWN_MARKER).exists()
    for p in list(full.iterdir()):
        if p.name.startswith(("inode-", "ballast")):
            p.unlink()
    m2 = LogManager([ok, full], SMALL, time=clock)
    m2.load()  # the locks were released
    assert m2.had_clean_shutdown == {ok: True, full: False}
    for tp in (("a", 0), ("b", 0)):
        lg = m2.get_log(tp)
        assert lg is not None and lg.log_end_offset == 15
        assert [x.base_offset for x in lg.iter_batches()] == [0, 3, 6, 9, 12]
    m2.shutdown()
