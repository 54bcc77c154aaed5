"""MirrorStatus: what a running mirror reports (per topic records/s, lag, skipped), and the
`--json-status` file written from it."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TopicStatus:
    """One source topic. `lag`: records in the source not yet acknowledged by the target,
    over the partitions this process owns (None before the first fetch answered)."""

    topic: str
    target_topic: str
    partitions: int = 0
    mirrored: int = 0
    skipped: int = 0
    records_per_sec: float = 0.0
    lag: int | None = None


@dataclass
class MirrorStatus:
    state: str  # starting, running, stopping, stopped, failed
    source: str
    target: str
    group: str
    topics: dict[str, TopicStatus] = field(default_factory=dict)
    mirrored: int = 0
    skipped: int = 0
    records_per_sec: float = 0.0
    lag: int | None = None
    error: str | None = None
    updated_ms: int = 0
    # failed lookups of the source topics in a row (the source cluster does not answer,
    # say; 0 once one succeeds) and the latest one's error: the mirror retries them
    source_lookup_failures: int = 0
    source_lookup_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["topics"] = {t: asdict(s) for t, s in sorted(self.topics.items())}
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MirrorStatus:
        fields = dict(data)
        topics = fields.pop("topics", {})
        out = cls(**fields)
        out.topics = {t: TopicStatus(**s) for t, s in topics.items()}
        return out


class RateMeter:
    """Records per second from successive running totals (per key)."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, int]] = {}
        self._rates: dict[str, float] = {}

    def update(self, key: str, total: int, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        last = self._last.get(key)
        if last is None:
            self._last[key] = (now, total)
            return 0.0
        elapsed = now - last[0]
        if elapsed >= 0.5:
            self._rates[key] = max(0, total - last[1]) / elapsed
            self._last[key] = (now, total)
        return self._rates.get(key, 0.0)


def write_status_file(path: str | Path, status: MirrorStatus) -> None:
    """Replace `path` with the status as JSON (atomically: readers never see half)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(status.to_json(), indent=2, sort_keys=True) + "\n",
                   encoding="utf-8")
    os.replace(tmp, path)
