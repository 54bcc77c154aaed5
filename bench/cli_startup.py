"""`kafkactl --help` and `kafkactl produce --help` wall time (what a user waits for at a
prompt and what completion scripts pay), next to `python -c pass` in the same run; the
medians of interleaved runs. Run it from the checkout's root (`python -m kafkactl` imports
the kafkactl of the working directory).

    python bench/cli_startup.py [--runs 7] [--summary-json PATH]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from summary import Row, add_summary_option, write_summary

COMMANDS = (["--help"], ["produce", "--help"])


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    add_summary_option(ap)
    args = ap.parse_args()
    # interleaved (pass, --help, produce --help, pass, ...): a load that comes and goes on a
    # shared machine weighs on every figure alike, not on whichever ran during it
    cmds = [[sys.executable, "-c", "pass"],
            *([sys.executable, "-m", "kafkactl", *argv] for argv in COMMANDS)]
    times: list[list[float]] = [[] for _ in cmds]
    for _ in range(args.runs):
        for cmd, samples in zip(cmds, times, strict=True):
            samples.append(wall(cmd))
    py = statistics.median(times[0])
    rows = []
    for argv, ts in zip(COMMANDS, times[1:], strict=True):
        t = statistics.median(ts)
        print(f"kafkactl {' '.join(argv):15s} {t * 1e3:6.0f} ms (best {min(ts) * 1e3:.0f})  "
              f"(python -c pass {py * 1e3:.0f} ms, best {min(times[0]) * 1e3:.0f})")
        rows.append(Row("6 keep: --help", f"kafkactl {' '.join(argv)}", t * 1e3, "ms",
                        "python -c pass", py * 1e3, t / py, "<= 300 ms", t <= 0.3))
    write_summary(args.summary_json, rows)


if __name__ == "__main__":
    main()
