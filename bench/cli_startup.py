"""`kafkactl --help` and `kafkactl produce --help` wall time (what a user waits for at a
prompt and what completion scripts pay), next to `python -c pass` in the same run.

    python bench/cli_startup.py [--runs 7] [--summary-json PATH]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from summary import Row, add_summary_option, write_summary


def wall(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    add_summary_option(ap)
    args = ap.parse_args()
    py = wall([sys.executable, "-c", "pass"], args.runs)
    rows = []
    for argv in (["--help"], ["produce", "--help"]):
        t = wall([sys.executable, "-m", "kafkactl", *argv], args.runs)
        print(f"kafkactl {' '.join(argv):15s} {t * 1e3:6.0f} ms   (python -c pass "
              f"{py * 1e3:.0f} ms)")
        rows.append(Row("6 keep: --help", f"kafkactl {' '.join(argv)}", t * 1e3, "ms",
                        "python -c pass", py * 1e3, t / py, "<= 300 ms", t <= 0.3))
    write_summary(args.summary_json, rows)


if __name__ == "__main__":
    main()
