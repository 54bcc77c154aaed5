"""Client throughput: kafkactl produce/consume vs kafka-python vs kcat, one broker, one run.

    python bench/client_produce_consume.py [N]      (default N = 5,000,000 lines of 100 B)

Starts `kafkactl serve` on a free port with a temp data dir, writes N lines of 100 bytes to
a file, then times (wall clock, whole process, start-up included):
  produce: `kafkactl produce -f FILE`, a kafka-python KafkaProducer script, `kcat -P -l FILE`
  consume: `kafkactl consume --from-beginning -e`, a kafka-python KafkaConsumer script,
           `kcat -C -e` (all to /dev/null, all reading the topic kafkactl produced)
and prints records/s and the ratios; then the same for lines of varying length (50-150
bytes), kafkactl against kcat only. Goals (issue 4): kafkactl >= 1 M rec/s and >= 3x
kafka-python both ways. Never gates anything: the box is shared and noisy.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable

KP_PRODUCE = r"""
import sys
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1], linger_ms=5, batch_size=1000000,
                  max_request_size=1048576)
with open(sys.argv[3], "rb") as f:
    for line in f:
        p.send(sys.argv[2], line[:-1], partition=0)
p.flush()
p.close()
"""

KP_CONSUME = r"""
import sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1], enable_auto_commit=False,
                  max_partition_fetch_bytes=8 << 20, fetch_max_bytes=50 << 20)
tp = TopicPartition(sys.argv[2], 0)
c.assign([tp]); c.seek_to_beginning(tp)
end = c.end_offsets([tp])[tp]; n = 0
while c.position(tp) < end:
    for recs in c.poll(1000, max_records=100000).values():
        n += len(recs)
assert n == int(sys.argv[3]), n
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(name: str, cmd: list[str], n: int, stdout: object = subprocess.DEVNULL) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, timeout=3600)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        print(f"{name}: FAILED ({r.returncode}) {r.stderr.decode(errors='replace')[-500:]}")
        return float("nan")
    rate = n / dt
    print(f"  {name:<28} {dt:8.2f} s  {rate:12,.0f} records/s", flush=True)
    return rate


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
    tmp = Path(tempfile.mkdtemp(prefix="kafkactl-bench-"))
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    data = tmp / "lines"
    with open(data, "wb") as f:
        block = b"".join(b"%09d" % i + b"x" * 91 + b"\n" for i in range(10000))
        for _ in range(n // 10000):
            f.write(block)
        f.write(block[: 101 * (n % 10000)])
    varied = tmp / "varied-lines"
    with open(varied, "wb") as f:  # 50..150 bytes, mean 100: real log lines vary
        block = b"".join(b"%09d" % i + b"y" * (41 + (i * 37) % 101) + b"\n"
                         for i in range(10000))
        for _ in range(n // 10000):
            f.write(block)
    broker = subprocess.Popen(
        [PY, "-m", "kafkactl", "serve", "--data-dir", str(tmp / "data"),
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(tmp / "broker.log", "wb"))  # noqa: SIM115
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        print(f"{n:,} lines of 100 bytes; broker {bootstrap}")
        print("produce:")
        kk = timed("kafkactl produce", [PY, "-m", "kafkactl", "produce", "-b", bootstrap,
                                        "-t", "kafkactl", "-p", "0", "-q", "-f", str(data)], n)
        kp = timed("kafka-python KafkaProducer",
                   [PY, "-c", KP_PRODUCE, bootstrap, "kafkapython", str(data)], n)
        kc = (timed("kcat -P", ["kcat", "-b", bootstrap, "-P", "-t", "kcat", "-p", "0", "-l",
                                str(data)], n) if shutil.which("kcat") else float("nan"))
        print("consume (topic written by kafkactl produce):")
        ck = timed("kafkactl consume", [PY, "-m", "kafkactl", "consume", "-b", bootstrap,
                                        "-t", "kafkactl", "--from-beginning", "-e", "-q"], n)
        cp = timed("kafka-python KafkaConsumer",
                   [PY, "-c", KP_CONSUME, bootstrap, "kafkactl", str(n)], n)
        cc = (timed("kcat -C -e", ["kcat", "-b", bootstrap, "-C", "-t", "kafkactl", "-e",
                                   "-q", "-o", "beginning"], n)
              if shutil.which("kcat") else float("nan"))
        nv = n // 10000 * 10000
        print("varying lengths (50-150 B, mean 100), kafkactl vs kcat:")
        vk = timed("kafkactl produce", [PY, "-m", "kafkactl", "produce", "-b", bootstrap,
                                        "-t", "varied", "-p", "0", "-q", "-f", str(varied)], nv)
        vc = (timed("kcat -P", ["kcat", "-b", bootstrap, "-P", "-t", "varied-kcat", "-p", "0",
                                "-l", str(varied)], nv) if shutil.which("kcat") else float("nan"))
        vck = timed("kafkactl consume", [PY, "-m", "kafkactl", "consume", "-b", bootstrap,
                                         "-t", "varied", "--from-beginning", "-e", "-q"], nv)
        vcc = (timed("kcat -C -e", ["kcat", "-b", bootstrap, "-C", "-t", "varied", "-e",
                                    "-q", "-o", "beginning"], nv)
               if shutil.which("kcat") else float("nan"))
        print("ratios:")
        print(f"  produce kafkactl/kafka-python = {kk / kp:.2f}x   kafkactl/kcat = {kk / kc:.2f}x")
        print(f"  consume kafkactl/kafka-python = {ck / cp:.2f}x   kafkactl/kcat = {ck / cc:.2f}x")
        print(f"  varying lengths: produce kafkactl/kcat = {vk / vc:.2f}x   "
              f"consume kafkactl/kcat = {vck / vcc:.2f}x")
        print(f"  goals: >= 1,000,000 rec/s (produce {kk:,.0f}, consume {ck:,.0f}) and >= 3x "
              "kafka-python")
    finally:
        broker.terminate()
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            broker.kill()
        shutil.rmtree(tmp, ignore_errors=True)
        os.sync()


if __name__ == "__main__":
    main()
