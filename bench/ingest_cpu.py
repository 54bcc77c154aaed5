"""Broker ingest CPU per million access-log records (issue 33, goal 3: at most half of what
the broker cost when the issue was filed), with kcat's own CPU for the same records.

`kcat -P -l FILE` writes `--records` access-log lines (bench/lines.py's generator: 50-500
bytes, realistic variation) to a one-partition topic of a fresh `kafkactl serve`; the figure
is the broker process's user+system CPU from the first record to the last acknowledged one,
per million records. The baseline is the same broker code as it was before the compiled
kernels (`--baseline REV`, default 3202199^, the commit issue 33 was measured on), checked
out into a temporary git worktree and run alternately with this checkout in the same run, so
both see the same machine. `--baseline-dir DIR` takes an existing checkout instead;
`--no-baseline` reports this checkout alone.

    python bench/ingest_cpu.py [--records 1000000] [--rounds 2] [--baseline REV]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from broker_common import start_broker
from lines import DATASETS, generate
from summary import Row, add_summary_option, write_summary

ROOT = Path(__file__).resolve().parent.parent
GOAL = "33 ingest CPU"
TOPIC = "ingest-cpu"


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one_round(build: Path, data: Path, records: int) -> tuple[float, float]:
    """(broker CPU s, kcat CPU s) for ingesting `data` with the broker of `build`."""
    os.environ["PYTHONPATH"] = str(build)
    broker = start_broker("num.partitions=1")
    try:
        # the topic exists (auto-created by a first record) before the timed part
        subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", TOPIC],
                       input=b"warm-up\n", check=True, capture_output=True, timeout=60)
        cpu0, kcat0 = broker.cpu_seconds(), children_cpu()
        r = subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", TOPIC,
                            "-X", "acks=1", "-l", str(data)],
                           capture_output=True, timeout=600)
        broker_cpu, kcat_cpu = broker.cpu_seconds() - cpu0, children_cpu() - kcat0
        if r.returncode != 0:
            raise RuntimeError(f"kcat failed: {r.stderr.decode(errors='replace')[-500:]}")
        return broker_cpu, kcat_cpu
    finally:
        broker.stop()


@contextlib.contextmanager
def baseline_checkout(rev: str) -> Iterator[Path]:
    where = Path(tempfile.mkdtemp(prefix="kafkactl-ingest-baseline-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev],
                   check=True, capture_output=True)
    try:
        yield where
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)],
                       capture_output=True)
        shutil.rmtree(where, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline", default="3202199^", help="git revision of the baseline")
    ap.add_argument("--baseline-dir", type=Path, default=None)
    ap.add_argument("--no-baseline", action="store_true")
    add_summary_option(ap)
    args = ap.parse_args()
    if shutil.which("kcat") is None:
        raise SystemExit("kcat is not installed (scripts/test.sh installs it)")
    work = Path(tempfile.mkdtemp(prefix="kafkactl-ingest-cpu-"))
    try:
        data = work / "access.log"
        generate(DATASETS["access"], data, args.records)
        with contextlib.ExitStack() as stack:
            builds: dict[str, Path] = {"this checkout": ROOT}
            if args.baseline_dir is not None:
                builds["baseline"] = args.baseline_dir.resolve()
            elif not args.no_baseline:
                builds["baseline"] = stack.enter_context(baseline_checkout(args.baseline))
            best: dict[str, tuple[float, float]] = {}
            for r in range(args.rounds):
                for name, build in builds.items():
                    b, k = one_round(build, data, args.records)
                    per_m = 1e6 / args.records
                    print(f"round {r + 1} {name:14s} broker {b * per_m:6.2f} s CPU per million "
                          f"records, kcat {k * per_m:5.2f} s", flush=True)
                    if name not in best or b < best[name][0]:
                        best[name] = (b * per_m, k * per_m)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mine, kcat_cpu = best["this checkout"]
    rows = []
    if "baseline" in best:
        base = best["baseline"][0]
        ratio = mine / base
        print(f"broker CPU per million access-log records: {mine:.2f} s against {base:.2f} s "
              f"before the kernels ({ratio:.2f}x, goal <= 0.5x); kcat's own {kcat_cpu:.2f} s")
        rows.append(Row(GOAL, "broker CPU per million access-log records (kcat -P)", mine,
                        "s", f"before the kernels ({args.baseline})", base, ratio, "<= 0.5x",
                        ratio <= 0.5))
    else:
        print(f"broker CPU per million access-log records: {mine:.2f} s; kcat's own "
              f"{kcat_cpu:.2f} s")
        rows.append(Row(GOAL, "broker CPU per million access-log records (kcat -P)", mine,
                        "s"))
    rows.append(Row(GOAL, "kcat's own CPU for the same records", kcat_cpu, "s"))
    write_summary(args.summary_json, rows)


if __name__ == "__main__":
    main()
