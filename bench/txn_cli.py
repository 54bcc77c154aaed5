"""kafkactl's own transactional client against its plain one, in the same run (issue 32):

* produce: `kafkactl produce -f FILE` (idempotent), then `--transactional-id` with one
  transaction for the whole input, then `--transaction-records 1000`; records/s and the
  ratios to the idempotent run;
* consume: `kafkactl consume -e` of the transactional topic (1,000-record transactions),
  `--isolation-level read_uncommitted` against `read_committed`; records/s and the ratio.

Wall clock of the whole process (start-up included), best of `--rounds`. Never gates
anything: the box is shared and noisy.

    python bench/txn_cli.py [--records 500000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker_common import start_broker

PY = sys.executable


def _run(*args: str) -> float:
    t0 = time.monotonic()
    r = subprocess.run([PY, "-m", "kafkactl", *args], capture_output=True, check=False)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"kafkactl {' '.join(args)} failed: {r.stderr.decode()[-2000:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = args.records
    broker = start_broker("group.initial.rebalance.delay.ms=0")
    try:
        b = broker.bootstrap
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "lines"
            data.write_bytes(b"".join(b"%099d\n" % i for i in range(n)))
            best: dict[str, float] = {}
            for r in range(args.rounds):
                for name, extra in (("idempotent", []),
                                    ("one transaction", ["--transactional-id", f"b1-{r}"]),
                                    ("1,000-record transactions",
                                     ["--transactional-id", f"b2-{r}",
                                      "--transaction-records", "1000"])):
                    topic = f"bench-{name.split()[0].strip(',').replace(',', '')}-{r}"
                    dt = _run("produce", "-t", topic, "-f", str(data), "-q", "-b", b, *extra)
                    best[name] = min(best.get(name, dt), dt)
            base = n / best["idempotent"]
            print(f"produce {n:,} records of 100 B (best of {args.rounds}):")
            for name, dt in best.items():
                rate = n / dt
                print(f"  {name:28s} {rate:12,.0f} records/s  {rate / base:5.2f}x idempotent")
            topic = "bench-1000-record-0"
            cbest: dict[str, float] = {}
            for _ in range(args.rounds):
                for level in ("read_uncommitted", "read_committed"):
                    dt = _run("consume", "-t", topic, "-o", "earliest", "-e", "-q",
                              "--isolation-level", level, "-b", b)
                    cbest[level] = min(cbest.get(level, dt), dt)
            print(f"consume {n:,} records in 1,000-record transactions (best of "
                  f"{args.rounds}):")
            unc = n / cbest["read_uncommitted"]
            for level, dt in cbest.items():
                rate = n / dt
                print(f"  {level:28s} {rate:12,.0f} records/s  {rate / unc:5.2f}x "
                      "read_uncommitted")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
