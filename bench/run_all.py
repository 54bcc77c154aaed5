"""Run every goal bench of the speed work in one go and print one table: figure, value,
baseline (measured in the same run), ratio, goal, met.

    python bench/run_all.py [--only 2,6] [--markdown bench/RESULTS.md] [--quick]
                            [--compiled-only]

Each bench is its own process (a broker per bench, started and stopped by it) and writes
its rows with --summary-json (bench/summary.py). A bench that fails or is missing a
dependency shows as a FAILED row with its last line of output; the others still run.
Every bench runs twice, with the compiled kernels (when built: the table's first line says)
and with KAFKACTL_NO_EXTENSIONS=1 (broker and clients alike), and the table shows both
figures side by side, each with its ratio to the baseline measured in its own run;
`--compiled-only` skips the pure runs. The verdict ("met") is the compiled figure's.
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
    ("33", "ingest_cpu.py", ["--rounds", "1"], ["--records", "200000", "--rounds", "1"]),
    ("33", "replication.py", ["--latency-only", "--rates", "2500,5000,10000,20000",
                              "--seconds", "3"],
     ["--latency-only", "--rates", "2500,5000", "--seconds", "3"]),
    ("3", "many_partitions.py", [], ["--topics", "20", "--partitions", "50", "--big", "1000"]),
    ("4", "many_connections.py", [], ["--idle", "500", "--seconds", "2"]),
    ("5", "size_independence.py", [], ["--large-gb", "0.5", "--small-mb", "50", "--seconds", "2"]),
    ("6", "broker_ingest.py", ["--producers", "2", "--seconds", "5"],
     ["--producers", "2", "--seconds", "2", "--kcat-records", "1000000"]),
    ("6", "broker_egress.py", [], ["--records", "500000"]),
    ("6", "log_recovery.py", ["--mib", "1024", "--runs", "3"], ["--mib", "128", "--runs", "1"]),
    ("6", "cli_startup.py", [], ["--runs", "3"]),
    ("32", "txn_producer.py", [], ["--records", "50000", "--rounds", "1"]),
    ("32", "txn_producer.py", ["--cluster", "--no-mock"],
     ["--cluster", "--no-mock", "--records", "20000", "--rounds", "1", "--commits", "100"]),
    ("32", "read_committed.py", [], ["--transactions", "300", "--rounds", "1"]),
    ("34", "metrics_overhead.py", [], ["--rounds", "1", "--seconds", "2",
                                       "--partitions", "2000", "--scrapes", "3"]),
]


def run(script: str, args: list[str], timeout: float, pure: bool = False
        ) -> tuple[list[Row], str]:
    """The rows a bench wrote, or none and the reason; `pure`: with KAFKACTL_NO_EXTENSIONS=1
    (the compiled kernels off in the bench, its broker and its clients)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        try:
            # the benches (and the brokers they start) run this checkout's kafkactl
            path = os.pathsep.join(filter(None, [str(HERE.parent),
                                                 os.environ.get("PYTHONPATH", "")]))
            env = {k: v for k, v in os.environ.items() if k != "KAFKACTL_NO_EXTENSIONS"}
            env["PYTHONPATH"] = path
            if pure:
                env["KAFKACTL_NO_EXTENSIONS"] = "1"
            p = subprocess.run([sys.executable, str(HERE / script), *args, "--summary-json",
                                str(out)], cwd=HERE.parent, capture_output=True, text=True,
                               timeout=timeout, env=env)
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


Result = tuple[Row | None, str, str]  # a row (None: the bench failed), its script, why


def table(rows: list[Result], pure: list[Result] | None = None) -> list[list[str]]:
    """One line per figure; with `pure` (the same benches under KAFKACTL_NO_EXTENSIONS=1)
    the pure figure and ratio beside the compiled ones, matched by goal and figure."""
    side = {(r.goal, r.figure): r for r, _s, _f in pure or [] if r is not None}
    head = ["goal", "figure", "value", "baseline (same run)", "ratio"]
    if pure is not None:
        head = ["goal", "figure", "compiled", "pure", "baseline (same run)",
                "ratio compiled", "ratio pure"]
    lines = [[*head, "target", "met"]]
    failed = [(s, f) for r, s, f in pure or [] if r is None]
    for row, script, failure in rows:
        if row is None:
            blanks = [""] * (len(head) - 4)
            lines.append(["", script, "FAILED", *blanks, failure, "", "no"])
            continue
        verdict = judge(row)
        met = "" if verdict is None else ("yes" if verdict else "no")
        base = f"{row.baseline}: {fmt(row.baseline_value)}" if row.baseline_value is not None \
            else row.baseline
        ratio = "" if row.ratio is None else f"{row.ratio:.2f}x"
        if pure is None:
            lines.append([row.goal, row.figure, fmt(row.value, row.unit), base, ratio,
                          row.target, met])
            continue
        p = side.get((row.goal, row.figure))
        lines.append([row.goal, row.figure, fmt(row.value, row.unit),
                      "" if p is None else fmt(p.value, p.unit), base, ratio,
                      "" if p is None or p.ratio is None else f"{p.ratio:.2f}x", row.target,
                      met])
    for script, failure in failed:
        lines.append(["", f"{script} (pure)", "", "FAILED", failure, "", "", "", ""])
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="comma-separated goal numbers, e.g. 2,6")
    ap.add_argument("--quick", action="store_true", help="smaller sizes: a smoke run")
    ap.add_argument("--markdown", type=Path, help="also write the table here (Markdown)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per bench")
    ap.add_argument("--compiled-only", action="store_true",
                    help="skip the pure-Python runs (KAFKACTL_NO_EXTENSIONS=1)")
    args = ap.parse_args()
    only = {g.strip() for g in args.only.split(",") if g.strip()}
    results: list[Result] = []
    pure: list[Result] | None = None if args.compiled_only else []
    started = time.monotonic()
    for goal, script, normal, quick in BENCHES:
        if only and goal not in only:
            continue
        if not (HERE / script).exists():
            results.append((None, script, "script missing"))
            continue
        for off in (False, True):
            if off and pure is None:
                continue
            print(f"\n=== {script} {' '.join(quick if args.quick else normal)}"
                  f"{' (KAFKACTL_NO_EXTENSIONS=1)' if off else ''}", flush=True)
            rows, failure = run(script, quick if args.quick else normal, args.timeout, off)
            into = pure if off and pure is not None else results
            into.extend((r, script, "") for r in rows)
            if failure:
                into.append((None, script, failure))
    lines = table(results, pure)
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    print(f"\nbench/run_all.py: {time.monotonic() - started:.0f} s, load average "
          f"{os.getloadavg()[0]:.1f}, {os.cpu_count()} cores; {kernels_status()}")
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    if args.markdown:
        md = ["| " + " | ".join(line) + " |" for line in lines]
        md.insert(1, "|" + "|".join("---" for _ in lines[0]) + "|")
        args.markdown.write_text("\n".join(md) + "\n")
    if any(r is None for r, _s, _f in [*results, *(pure or [])]):
        sys.exit(1)


def kernels_status() -> str:
    """`kafkactl --version`'s kernels line for this checkout (what the compiled runs use)."""
    p = subprocess.run([sys.executable, "-c", "from kafkactl.record._accel import STATUS; "
                        "print(STATUS)"], cwd=HERE.parent, capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items()
                            if k != "KAFKACTL_NO_EXTENSIONS"})
    return p.stdout.strip() or p.stderr.strip().splitlines()[-1]


if __name__ == "__main__":
    main()
