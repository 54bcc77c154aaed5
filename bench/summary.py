"""One result row per figure a bench script measures, for bench/run_all.py.

Every goal bench takes `--summary-json PATH` (add_summary_option) and, at its end, writes
its rows there (write_summary): the figure, its value, the baseline it is compared with in
the same run, the ratio, and the goal it is held to. run_all.py prints them as one table.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Row:
    goal: str  # which issue goal, e.g. "2 small requests"
    figure: str  # what was measured, e.g. "broker CPU per Produce request"
    value: float
    unit: str
    baseline: str = ""  # what it is compared with, in the same run
    baseline_value: float | None = None
    ratio: float | None = None  # value / baseline_value (or as the goal reads it)
    target: str = ""  # e.g. ">= 1.0x kcat", "<= 50 ms"
    met: bool | None = None  # None: informative, no goal


def add_summary_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--summary-json", type=Path, default=None,
                    help="also write the result rows here as JSON (bench/run_all.py)")


def write_summary(path: Path | None, rows: list[Row]) -> None:
    if path is not None:
        path.write_text(json.dumps([asdict(r) for r in rows], indent=1))


def read_summary(path: Path) -> list[Row]:
    return [Row(**{k: v for k, v in r.items() if k in Row.__dataclass_fields__})
            for r in json.loads(path.read_text())]
