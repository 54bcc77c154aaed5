"""FileMap: a shared writable mapping that keeps no descriptor (and its mmap.mmap fallback)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from kafkactl.log import file_map
from kafkactl.log.file_map import FileMap


@pytest.mark.parametrize("libc", [True, False], ids=["libc", "fallback"])
def test_writes_reach_the_file_and_no_descriptor_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, libc: bool) -> None:
    if not libc:
        monkeypatch.setattr(file_map, "_libc", None)
    elif file_map._libc is None:
        pytest.skip("no libc mmap here")
    path = tmp_path / "x.index"
    path.write_bytes(bytes(4096))
    before = set(os.listdir("/proc/self/fd"))
    fd = os.open(path, os.O_RDWR)
    fm = FileMap(fd, 4096)
    os.close(fd)
    if libc:
        assert set(os.listdir("/proc/self/fd")) == before
    struct.pack_into(">ii", fm.data, 8, 7, 42)
    fm.data[0:4] = b"abcd"
    assert fm.data[0:4] == b"abcd" and struct.unpack_from(">ii", fm.data, 8) == (7, 42)
    fm.flush()
    fm.close()
    fm.close()  # twice is harmless
    assert fm.data is None
    data = path.read_bytes()
    assert data[:4] == b"abcd" and struct.unpack_from(">ii", data, 8) == (7, 42)
