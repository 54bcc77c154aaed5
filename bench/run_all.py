"""Run every goal bench of the speed work in one go and print one table: figure, value,
baseline (measured in the same run), ratio, goal, met.

    python bench/run_all.py [--only 2,6] [--markdown bench/RESULTS.md] [--quick]

Each bench is its own process (a broker per bench, started and stopped by it) and writes
its rows with --summary-json (bench/summary.py). A bench that fails or is missing a
dependency shows as a FAILED row with its last line of output; the others still run.
`--quick` passes smaller sizes where a bench has them (a smoke run, not the figures).
The machine is shared and has 2 cores: compare ratios, and rerun a surprising figure alone.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from summary import Row, read_summary

HERE = Path(__file__).resolve().parent

# (goal number, script, default arguments, --quick arguments)
BENCHES: list[tuple[str, str, list[str], list[str]]] = [
    ("1", "lines.py", [], ["--records", "200000"]),
    ("2", "small_requests.py", ["--seconds", "5"], ["--seconds", "2", "--producers", "8"]),
    ("3", "many_partitions.py", [], ["--topics", "20", "--partitions", "50", "--big", "1000"]),
    ("4", "many_connections.py", [], ["--idle", "500", "--seconds", "2"]),
    ("5", "size_independence.py", [], ["--large-gb", "0.5", "--small-mb", "50", "--seconds", "2"]),
    ("6", "broker_ingest.py", ["--producers", "2", "--seconds", "5"],
     ["--producers", "2", "--seconds", "2", "--kcat-records", "1000000"]),
    ("6", "broker_egress.py", [], ["--records", "500000"]),
    ("6", "log_recovery.py", ["--mib", "1024", "--runs", "3"], ["--mib", "128", "--runs", "1"]),
    ("6", "cli_startup.py", [], ["--runs", "3"]),
]


def run(script: str, args: list[str], timeout: float) -> tuple[list[Row], str]:
    """The rows a bench wrote, or none and the reason."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        try:
            # the benches (and the brokers they start) run this checkout's kafkactl
            path = os.pathsep.join(filter(None, [str(HERE.parent),
                                                 os.environ.get("PYTHONPATH", "")]))
            p = subprocess.run([sys.executable, str(HERE / script), *args, "--summary-json",
                                str(out)], cwd=HERE.parent, capture_output=True, text=True,
                               timeout=timeout, env={**os.environ, "PYTHONPATH": path})
        except subprocess.TimeoutExpired:
            return [], f"timed out after {timeout:.0f} s"
        sys.stdout.write(p.stdout)
        if p.returncode != 0 or not out.exists():
            last = (p.stderr.strip() or p.stdout.strip() or "no output").splitlines()[-1]
            return [], f"exit {p.returncode}: {last}"
        return read_summary(out), ""


def fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return ""
    if abs(v) >= 1000:
        text = f"{v:,.0f}"
    elif abs(v) >= 10:
        text = f"{v:.1f}"
    else:
        text = f"{v:.2f}"
    return f"{text} {unit}".strip()


_TARGET = re.compile(r"\s*(>=|<=)\s*([\d.,]+)\s*(\S*)")


def judge(row: Row) -> bool | None:
    """Whether `row` meets its target: the bench's own verdict, or read from targets like
    ">= 0.75x" (the ratio), "<= 50 ms" / ">= 35,000 req/s" / ">= 1 M rec/s" (the value),
    ">=1.0" (the ratio when there is one); None for "report" rows."""
    if row.met is not None:
        return row.met
    m = _TARGET.match(row.target)
    if m is None:
        return None
    op, number, suffix = m.group(1), float(m.group(2).replace(",", "")), m.group(3)
    scale = {"k": 1e3, "M": 1e6}.get(suffix, 1.0)
    use_ratio = suffix == "x" or (not suffix and row.ratio is not None)
    got = row.ratio if use_ratio else row.value
    if got is None:
        return None
    want = number * scale
    return got >= want if op == ">=" else got <= want


def table(rows: list[tuple[Row | None, str, str]]) -> list[list[str]]:
    lines = [["goal", "figure", "value", "baseline (same run)", "ratio", "target", "met"]]
    for row, script, failure in rows:
        if row is None:
            lines.append(["", script, "FAILED", failure, "", "", "no"])
            continue
        verdict = judge(row)
        met = "" if verdict is None else ("yes" if verdict else "no")
        base = f"{row.baseline}: {fmt(row.baseline_value)}" if row.baseline_value is not None \
            else row.baseline
        lines.append([row.goal, row.figure, fmt(row.value, row.unit), base,
                      "" if row.ratio is None else f"{row.ratio:.2f}x", row.target, met])
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="comma-separated goal numbers, e.g. 2,6")
    ap.add_argument("--quick", action="store_true", help="smaller sizes: a smoke run")
    ap.add_argument("--markdown", type=Path, help="also write the table here (Markdown)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per bench")
    args = ap.parse_args()
    only = {g.strip() for g in args.only.split(",") if g.strip()}
    results: list[tuple[Row | None, str, str]] = []
    started = time.monotonic()
    for goal, script, normal, quick in BENCHES:
        if only and goal not in only:
            continue
        if not (HERE / script).exists():
            results.append((None, script, "script missing"))
            continue
        print(f"\n=== {script} {' '.join(quick if args.quick else normal)}", flush=True)
        rows, failure = run(script, quick if args.quick else normal, args.timeout)
        results.extend((r, script, "") for r in rows)
        if failure:
            results.append((None, script, failure))
    lines = table(results)
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    print(f"\nbench/run_all.py: {time.monotonic() - started:.0f} s, load average "
          f"{os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    if args.markdown:
        md = ["| " + " | ".join(line) + " |" for line in lines]
        md.insert(1, "|" + "|".join("---" for _ in lines[0]) + "|")
        args.markdown.write_text("\n".join(md) + "\n")
    if any(r is None for r, _s, _f in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
