"""Crash-safe JSON files in the data dir (as the checkpoints are written): the new content
goes to `<name>.tmp`, is fsynced, renamed over the file, and the directory is fsynced, so a
crash leaves either the old file or the new one, never a torn one. They may hold secrets
(password hashes, encrypted passwords): the file is the owner's only (mode 0600), whatever
the umask or the mode of a `.tmp` left behind by a crash."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any


class StoreFileError(RuntimeError):
    """A store file that exists but cannot be read; the message names it."""


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    payload = json.dumps(data, indent=1, sort_keys=True).encode("utf-8") + b"\n"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to a file that exists
        os.write(fd, payload)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def read_json(path: Path, version: int) -> dict[str, Any]:
    """The file's object ({} when absent); StoreFileError when damaged or too new."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (UnicodeDecodeError, ValueError) as e:
        raise StoreFileError(f"{path} is damaged ({e}); restore it from a backup or "
                             "remove it (its ACLs or users are then gone)") from None
    if not isinstance(data, dict) or data.get("version", version) != version:
        raise StoreFileError(f"{path} is not a version-{version} kafkactl store file")
    return data
