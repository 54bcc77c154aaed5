"""Lines of varying length, kafkactl against kcat both ways (issue 20, goal 1).

    python bench/lines.py [--records 1000000] [--rounds 1] [--kafkactl DIR ...]
                          [--datasets access,json] [--produce-only] [--tombstones N]
                          [--summary-json PATH]

Generates two inputs of `--records` lines each, 50-500 bytes with realistic variation: an
nginx-style access log (combined format: client address, time, request line with paths
and query strings, status, size, referer, user agent) and a JSON events file (one event
object per line, a varying number of properties). Starts one `kafkactl serve` and, for
each input, times whole processes (start-up included, output to /dev/null):

  produce unkeyed   `kcat -P -l FILE`            vs `kafkactl produce -f FILE`
  produce keyed     `kcat -P -K SEP -l FILE`     vs `kafkactl produce -K SEP -f FILE`
                    (SEP is in every line: ' ' after the access log's client address,
                    ',' after the JSON event's first field), into a topic of one
                    partition and into one of four (each key's partition by murmur2)
  consume plain     `kcat -C -e`                 vs `kafkactl consume --from-beginning -e`
                    (of the unkeyed topic, then of the keyed one: values only)
  consume -f        `kcat -C -e -f '%k\\t%s\\n'` vs `kafkactl consume ... -f '%k\\t%s\\n'`
                    (of the keyed topic)

and, once, tombstones: `--records` `key:value` lines (the access log's lines as values,
100,000 keys), every `--tombstones N`-th one `key:` (3: dense; 0 leaves the row out),
`kcat -P -K : -Z -l FILE` vs `kafkactl produce -K : -Z -f FILE` (-Z: the empty value is
null, a tombstone), into a topic of one partition.

Both consumers read the topics kcat wrote, so they decode the same batches. Prints
records/s of each, the ratio kafkactl/kcat (goal >= 1.5, issue 33) and a summary table, then each
client's CPU time per record (steadier than wall time when the machine is shared);
`--summary-json PATH` writes the summary rows for bench/run_all. `--kafkactl DIR` (repeat
it) runs the kafkactl clients from other checkouts too (PYTHONPATH=DIR), alternately with
this one, for before/after figures in the same conditions; the broker is always this
checkout's. Each build's modules are byte-compiled first (`compileall`), as an installed
kafkactl's are: a checkout without them (a fresh worktree, or PYTHONDONTWRITEBYTECODE=1 with
sources newer than their bytecode) would compile what it imports in every timed run. With
`--rounds R` each figure is the best of R alternating runs. Never gates anything: the box
is shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker_common import Broker, start_broker

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
FORMAT = "%k\\t%s\\n"
POOL = 50_000  # distinct lines generated; the file repeats them
MIN_LINE, MAX_LINE = 50, 500

PATHS = ["", "api", "v1", "v2", "users", "orders", "items", "search", "static", "img",
         "css", "js", "checkout", "cart", "account", "settings", "health", "metrics",
         "products", "category", "reviews", "login", "logout", "feed", "notifications"]
AGENTS = [
    "-", "curl/8.5.0", "Wget/1.21.4", "kube-probe/1.29", "Go-http-client/1.1",
    "python-requests/2.31.0", "Prometheus/2.48.0",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/119.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36 Edg/120.0.0.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1_2 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:120.0) Gecko/20100101 Firefox/120.0",
]
EVENTS = ["page_view", "click", "add_to_cart", "purchase", "login", "logout", "search",
          "signup", "error", "heartbeat"]
PROPS = ["page", "referrer", "campaign", "device", "os", "browser", "country", "city",
         "price", "currency", "sku", "quantity", "query", "results", "latency_ms",
         "experiment", "variant", "plan", "message", "code"]


def _word(rng: random.Random, lo: int, hi: int) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789")
                   for _ in range(rng.randint(lo, hi)))


def _fit(line: str) -> bytes:
    data = line.encode()
    if len(data) < MIN_LINE:
        data += b" " * (MIN_LINE - len(data))
    return data[:MAX_LINE]


def access_line(rng: random.Random, t: int) -> bytes:
    ip = ".".join(str(rng.randint(1, 254)) for _ in range(4))
    user = "-" if rng.random() < 0.9 else _word(rng, 3, 10)
    stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(t))
    method = rng.choices(["GET", "POST", "PUT", "DELETE", "HEAD"], [80, 12, 4, 2, 2])[0]
    path = "/" + "/".join(rng.choice(PATHS) for _ in range(rng.randint(0, 5)))
    if rng.random() < 0.1:
        path += "/" + str(rng.randint(1, 10 ** rng.randint(1, 9)))
    if rng.random() < 0.4:
        path += "?" + "&".join(f"{_word(rng, 1, 8)}={_word(rng, 1, 24)}"
                               for _ in range(rng.randint(1, 8)))
    status = rng.choices([200, 201, 204, 301, 304, 400, 401, 404, 500, 503],
                         [70, 3, 2, 3, 8, 3, 2, 6, 2, 1])[0]
    size = rng.randint(0, 10 ** rng.randint(1, 6))
    referer = "-" if rng.random() < 0.5 else \
        f"https://{_word(rng, 3, 12)}.example.com/{_word(rng, 0, 40)}"
    agent = rng.choice(AGENTS)
    if rng.random() < 0.15:  # the short lines of health checks and probes
        return _fit(f'{ip} - - [{stamp}] "GET /health HTTP/1.1" {status} {size} "-" "-"')
    return _fit(f'{ip} - {user} [{stamp}] "{method} {path} HTTP/1.1" {status} {size} '
                f'"{referer}" "{agent}"')


def event_line(rng: random.Random, t: int) -> bytes:
    event: dict[str, object] = {
        "ts": t * 1000 + rng.randint(0, 999), "type": rng.choice(EVENTS),
        "user": f"u{rng.randint(1, 10 ** rng.randint(2, 7))}"}
    if rng.random() < 0.7:
        event["session"] = _word(rng, 8, 32)
    props: dict[str, object] = {}
    for name in rng.sample(PROPS, rng.choices(range(13), [6, 8, 10, 10, 10, 9, 8, 7, 6, 5,
                                                          4, 3, 2])[0]):
        r = rng.random()
        props[name] = (rng.randint(0, 10 ** rng.randint(1, 6)) if r < 0.3 else
                       round(rng.uniform(0, 1000), 2) if r < 0.4 else
                       rng.random() < 0.5 if r < 0.45 else _word(rng, 1, 30))
    if props:
        event["props"] = props
    return _fit(json.dumps(event, separators=(",", ":")))


@dataclass
class Dataset:
    name: str
    make: Callable[[random.Random, int], bytes]
    key_separator: str  # as given on the command line of both tools
    path: Path = Path()
    records: int = 0
    sizes: tuple[int, float, int] = (0, 0.0, 0)  # min, mean, max line length


DATASETS = {
    "access": Dataset("access log", access_line, " "),
    "json": Dataset("JSON events", event_line, ","),
}


def generate(ds: Dataset, path: Path, n: int, seed: int = 20) -> None:
    rng = random.Random(seed)
    t0 = 1_795_000_000
    pool = [ds.make(rng, t0 + i // 50) for i in range(min(n, POOL))]
    block = b"\n".join(pool) + b"\n"
    with open(path, "wb") as f:
        for _ in range(n // len(pool)):
            f.write(block)
        rest = n % len(pool)
        if rest:
            f.write(b"\n".join(pool[:rest]) + b"\n")
    lens = [len(x) for x in pool]
    ds.path, ds.records = path, n
    ds.sizes = (min(lens), sum(lens) / len(lens), max(lens))


def generate_tombstones(path: Path, n: int, every: int, seed: int = 20) -> Dataset:
    """`key:value` lines (the access log's lines as values, 100,000 keys), every `every`-th
    one `key:`: a compacted topic's change stream dense with deletes (-Z: tombstones)."""
    rng = random.Random(seed)
    t0 = 1_795_000_000
    pool = [access_line(rng, t0 + i // 50) for i in range(min(n, POOL))]
    with open(path, "wb") as f:
        for start in range(0, n, POOL):
            f.write(b"".join(b"user%d:%s\n" % (i % 100_000, b"" if i % every == every - 1
                                                 else pool[i % len(pool)])
                             for i in range(start, min(start + POOL, n))))
    return Dataset(f"tombstones 1 in {every}", access_line, ":", path, n)


@dataclass
class Figure:
    label: str
    kcat: float = 0.0
    kafkactl: dict[str, float] = field(default_factory=dict)  # build label -> rec/s
    # client CPU seconds (user + system) of the fastest run: "kcat" and each build label
    cpu: dict[str, float] = field(default_factory=dict)
    records: int = 1

    def keep(self, who: str, rate: float) -> None:
        """Record a run's rate (and its CPU time) when it is the best so far."""
        best = self.kcat if who == "kcat" else self.kafkactl.get(who, 0.0)
        if rate > best:
            if who == "kcat":
                self.kcat = rate
            else:
                self.kafkactl[who] = rate
            self.cpu[who] = CPU["last"]


CPU: dict[str, float] = {}  # command label -> CPU seconds of its last run


def run(cmd: list[str], build: Path | None = None) -> tuple[float, str]:
    """Wall-clock seconds of `cmd` (stdout to /dev/null) and its stderr; its CPU seconds
    (user + system) go to CPU["last"]. A kafkactl `build` runs from its directory (`python
    -m` puts the working directory first on sys.path, before PYTHONPATH)."""
    env = None if build is None else {**os.environ, "PYTHONPATH": str(build)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                       cwd=build, timeout=3600)
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU["last"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    err = r.stderr.decode(errors="replace")
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {err[-800:]}")
    return dt, err


def check_count(what: str, err: str, pattern: str, n: int) -> None:
    m = re.search(pattern, err)
    got = int(m.group(1).replace(",", "")) if m else None
    if got != n:
        raise RuntimeError(f"{what}: expected {n:,} records, saw {got} in: {err[-500:]}")


class Bench:
    def __init__(self, broker: Broker, builds: dict[str, Path], rounds: int) -> None:
        self.broker = broker
        self.builds = builds
        self.rounds = rounds
        self.figures: list[Figure] = []
        self.serial = 0

    def kafkactl(self, *args: str) -> list[str]:
        return [PY, "-m", "kafkactl", *args, "-b", self.broker.bootstrap]

    def topic(self, what: str) -> str:
        self.serial += 1
        return f"{what}-{self.serial}"

    def report(self, fig: Figure, n: int) -> None:
        cells = [f"kcat {fig.kcat:>10,.0f}"] + [
            f"{b} {r:>10,.0f} ({r / fig.kcat:.2f}x)" for b, r in fig.kafkactl.items()]
        print(f"  {fig.label:<34} rec/s: " + "   ".join(cells), flush=True)
        cpu = "   ".join(f"{b} {s / n * 1e6:.2f}" for b, s in fig.cpu.items())
        print(f"  {'':<34} client CPU µs/record: {cpu}", flush=True)

    def new_topic(self, what: str, partitions: int) -> str:
        """A topic name; made beforehand (not timed) with `partitions` when more than one
        (else the first produce makes it, with the broker's default of one)."""
        topic = self.topic(what)
        if partitions > 1:
            subprocess.run(self.kafkactl("topics", "create", "-t", topic, "--partitions",
                                         str(partitions)), check=True, capture_output=True)
        return topic

    def produce(self, ds: Dataset, keyed: bool, partitions: int = 1, *,
                label: str | None = None, args: tuple[str, ...] = ()) -> str:
        """Both producers `rounds` times each (with `args`: options both take alike);
        returns a topic kcat wrote."""
        fig = Figure(label or (f"produce {'keyed -K' if keyed else 'unkeyed'}"
                               + (f", {partitions} partitions" if partitions > 1 else "")),
                     records=ds.records)
        n = ds.records
        ksep = ["-K", ds.key_separator] if keyed else []
        kcat_topic = ""
        for _ in range(self.rounds):
            kcat_topic = self.new_topic("kcat", partitions)
            dt, _ = run(["kcat", "-b", self.broker.bootstrap, "-P", "-t", kcat_topic, *ksep,
                         *args, "-l", str(ds.path)])
            fig.keep("kcat", n / dt)
            for who, build in self.builds.items():
                topic = self.new_topic("kafkactl", partitions)
                dt, err = run(self.kafkactl("produce", "-t", topic, *ksep, *args,
                                            "-f", str(ds.path)), build)
                check_count(f"kafkactl produce ({who})", err,
                            r"([\d,]+) of [\d,]+ records acknowledged", n)
                fig.keep(who, n / dt)
        self.report(fig, n)
        fig.label = f"{ds.name}: {fig.label}"
        self.figures.append(fig)
        return kcat_topic

    def consume(self, ds: Dataset, topic: str, fmt: str | None, of: str = "") -> None:
        fig = Figure((f"consume -f '{fmt}'" if fmt else "consume plain") + of,
                     records=ds.records)
        n = ds.records
        f = ["-f", fmt] if fmt else []
        for _ in range(self.rounds):
            dt, err = run(["kcat", "-b", self.broker.bootstrap, "-C", "-t", topic, "-e",
                           "-o", "beginning", *f])
            check_count("kcat -C", err, r"Reached end of topic .* at offset (\d+)", n)
            fig.keep("kcat", n / dt)
            for label, build in self.builds.items():
                dt, err = run(self.kafkactl("consume", "-t", topic, "--from-beginning",
                                            "-e", *f), build)
                check_count(f"kafkactl consume ({label})", err,
                            r"Processed a total of ([\d,]+) messages", n)
                fig.keep(label, n / dt)
        self.report(fig, n)
        fig.label = f"{ds.name}: {fig.label}"
        self.figures.append(fig)


def summary(figures: list[Figure], builds: list[str]) -> list[dict[str, object]]:
    print("\nsummary (records/s; goal: kafkactl/kcat >= 1.5):")
    print(f"  {'figure':<46} {'kcat':>10}" + "".join(f" {b:>12} {'ratio':>6}" for b in builds))
    rows: list[dict[str, object]] = []
    for fig in figures:
        cells = "".join(f" {fig.kafkactl[b]:>12,.0f} {fig.kafkactl[b] / fig.kcat:>5.2f}x"
                        for b in builds)
        print(f"  {fig.label:<46} {fig.kcat:>10,.0f}{cells}")
        value = fig.kafkactl[builds[0]]
        rows.append({"goal": "1 lines", "figure": fig.label, "value": round(value),
                     "unit": "records/s", "baseline": "kcat", "baseline_value": round(fig.kcat),
                     "ratio": round(value / fig.kcat, 3), "target": ">=1.5"})
    worst = min(fig.kafkactl[builds[0]] / fig.kcat for fig in figures)
    print(f"  worst ratio ({builds[0]}): {worst:.2f}x")
    print("\nclient CPU µs/record (user + system, start-up included; steadier than wall "
          "time on a shared machine):")
    print(f"  {'figure':<46} {'kcat':>8}" + "".join(f" {b:>12}" for b in builds))
    for fig in figures:
        n = fig.records
        print(f"  {fig.label:<46} {fig.cpu['kcat'] / n * 1e6:>8.2f}"
              + "".join(f" {fig.cpu[b] / n * 1e6:>12.2f}" for b in builds))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="lines per input file")
    ap.add_argument("--rounds", type=int, default=1, help="best of this many runs each")
    ap.add_argument("--kafkactl", type=Path, action="append", default=[],
                    help="also run the kafkactl clients of this checkout (repeatable)")
    ap.add_argument("--datasets", default="access,json", help="access, json or both")
    ap.add_argument("--produce-only", action="store_true",
                    help="the produce figures only (more rounds of them in the same time)")
    ap.add_argument("--tombstones", type=int, default=3, metavar="N",
                    help="the tombstone row: every N-th keyed line a tombstone (-Z); 0: "
                         "no such row")
    ap.add_argument("--summary-json", type=Path, help="write the summary rows here")
    args = ap.parse_args()
    if not shutil.which("kcat"):
        sys.exit("kcat is not installed: the baseline needs it")
    builds = {"kafkactl": ROOT}
    for d in args.kafkactl:
        builds[f"{d.resolve().name}"] = d.resolve()
    for build in builds.values():  # bytecode as an installed kafkactl has it
        subprocess.run([PY, "-m", "compileall", "-q", str(build / "kafkactl")],
                       stdout=subprocess.DEVNULL, check=False)
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"kafkactl-lines-{os.getpid()}"
    tmp.mkdir()
    os.environ["PYTHONPATH"] = str(ROOT)
    os.chdir(ROOT)  # the broker is this checkout's (python -m looks in the cwd first)
    broker = start_broker("log.segment.bytes=1073741824", data_dir=tmp / "data")
    try:
        bench = Bench(broker, builds, args.rounds)
        for name in args.datasets.split(","):
            ds = DATASETS[name]
            generate(ds, tmp / f"{name}.txt", args.records)
            lo, mean, hi = ds.sizes
            print(f"{ds.name}: {ds.records:,} lines of {lo}-{hi} bytes (mean {mean:.0f}); "
                  f"broker {broker.bootstrap}; kafkactl builds: "
                  + ", ".join(f"{k}={v}" for k, v in builds.items()), flush=True)
            unkeyed = bench.produce(ds, keyed=False)
            keyed = bench.produce(ds, keyed=True)
            bench.produce(ds, keyed=True, partitions=4)  # keys spread over partitions
            if not args.produce_only:
                bench.consume(ds, unkeyed, None)
                bench.consume(ds, keyed, None, " (keyed topic)")
                bench.consume(ds, keyed, FORMAT)
            ds.path.unlink()
        if args.tombstones > 0:
            ds = generate_tombstones(tmp / "tombstones.txt", args.records, args.tombstones)
            print(f"{ds.name}: {ds.records:,} key:value lines, 1 in {args.tombstones} a "
                  "tombstone (`key:`)", flush=True)
            bench.produce(ds, keyed=True, label="produce -K : -Z (kcat -Z)",
                          args=("-Z",))
            ds.path.unlink()
        rows = summary(bench.figures, list(builds))
        if args.summary_json is not None:
            args.summary_json.write_text(json.dumps(rows, indent=1) + "\n")
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
