"""The transactional producer against the same producer idempotent-only (issue 32's
"transactional >= 0.8x idempotent"), and EndTxn latency, in the same run.

confluent-kafka (librdkafka) writes `--records` 100-byte records to a one-partition topic,
once idempotent (flushed at the end) and once in transactions of 1,000 records (each
committed), back to back in each of `--rounds` rounds (alternating which goes first); the
figures are the medians of the rounds' records per second and of their pairs' ratios, so a
change of the machine's load between rounds does not land on one side. Then `--commits`
transactions of one record: the record is flushed first, so the time of
commit_transaction() is EndTxn's (PrepareCommit written, answered; the next transaction's
AddPartitionsToTxn waits for the markers), p50 and p99. With `--cluster` (ZooKeeper, java)
the same runs on three brokers with RF=3 topics and `__transaction_state`. Last, the same
rounds against librdkafka's in-process mock broker (`test.mock.num.brokers`, no network and
no broker CPU to speak of): that ratio is the client's own ceiling on this machine, what no
broker can beat (`--no-mock` skips it).

    python bench/txn_producer.py [--records 100000] [--commits 300] [--rounds 5] [--cluster]
                                 [--no-mock]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from broker_common import Broker, start_broker
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from summary import Row, add_summary_option, write_summary

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.cluster.zk import ZooKeeperServer, available  # noqa: E402

TXN_RECORDS = 1000
VALUE = b"x" * 100


def _topic(bootstrap: str, name: str, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, 1, rf)]).values():
        f.result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and md.partitions and \
                all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{name} has no leader")


def _target(bootstrap: str | None) -> dict[str, Any]:
    """Where the producer writes: a broker, or (None) librdkafka's in-process mock broker."""
    return {"bootstrap.servers": bootstrap} if bootstrap else {"test.mock.num.brokers": 1}


def idempotent(bootstrap: str | None, topic: str, records: int) -> float:
    p = Producer({**_target(bootstrap), "enable.idempotence": True,
                  "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    p.produce(topic, VALUE)  # the producer id and metadata before the clock, as
    p.flush(60)              # init_transactions() is for the transactional one
    t0 = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return records / (time.perf_counter() - t0)


def transactional(bootstrap: str | None, topic: str, records: int, tid: str) -> float:
    p = Producer({**_target(bootstrap), "transactional.id": tid, "linger.ms": 5,
                  "queue.buffering.max.messages": 1_000_000})
    p.init_transactions(60)
    t0 = time.perf_counter()
    for start in range(0, records, TXN_RECORDS):
        p.begin_transaction()
        for _ in range(min(TXN_RECORDS, records - start)):
            while True:
                try:
                    p.produce(topic, VALUE)
                    break
                except BufferError:
                    p.poll(0.01)
        p.commit_transaction(120)
    return records / (time.perf_counter() - t0)


def rounds(bootstrap: str | None, rf: int, records: int, n: int, where: str
           ) -> tuple[list[float], list[float]]:
    """`n` rounds of the idempotent and the transactional producer back to back, in
    alternating order (a pair sees the same machine): their records/s."""
    idems: list[float] = []
    txns: list[float] = []
    for r in range(n):
        if bootstrap is not None:
            _topic(bootstrap, f"idem-{r}", rf)
            _topic(bootstrap, f"txn-{r}", rf)
        for run in (("idem", "txn") if r % 2 == 0 else ("txn", "idem")):
            if run == "idem":
                idems.append(idempotent(bootstrap, f"idem-{r}", records))
            else:
                txns.append(transactional(bootstrap, f"txn-{r}", records, f"bench-{r}"))
        print(f"{where}: round {r + 1}: idempotent {idems[-1]:,.0f}, transactional "
              f"{txns[-1]:,.0f} records/s ({txns[-1] / idems[-1]:.2f})", flush=True)
    return idems, txns


def median_ratio(txns: list[float], idems: list[float]) -> float:
    return statistics.median(t / i for t, i in zip(txns, idems, strict=True))


def end_txn_latencies(bootstrap: str, topic: str, commits: int, tid: str) -> list[float]:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(60)
    out = []
    for _ in range(commits):
        p.begin_transaction()
        p.produce(topic, VALUE)
        p.flush(60)
        t0 = time.perf_counter()
        p.commit_transaction(60)
        out.append(time.perf_counter() - t0)
    return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


@contextlib.contextmanager
def standalone() -> Iterator[tuple[str, int]]:
    b = start_broker()
    try:
        yield b.bootstrap, 1
    finally:
        b.stop()


@contextlib.contextmanager
def cluster() -> Iterator[tuple[str, int]]:
    why = available()
    if why is not None:
        raise SystemExit(f"--cluster needs ZooKeeper and java: {why}")
    base = Path(tempfile.mkdtemp(prefix="kafkactl-txn-bench-"))
    zk = ZooKeeperServer(base / "zk", jvm_options=())
    zk.start()
    brokers: list[Broker] = []
    try:
        for i in (1, 2, 3):
            brokers.append(start_broker(
                f"broker.id={i}", f"zookeeper.connect={zk.connect}/txnbench",
                "transaction.state.log.replication.factor=3",
                "transaction.state.log.min.isr=2", "default.replication.factor=3"))
        admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
        deadline = time.monotonic() + 60
        while len(admin.list_topics(timeout=10).brokers) < 3:
            if time.monotonic() > deadline:
                raise RuntimeError("three brokers did not register")
            time.sleep(0.2)
        yield ",".join(b.bootstrap for b in brokers), 3
    finally:
        for b in brokers:
            b.stop()
        zk.stop()
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--commits", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cluster", action="store_true", help="three brokers, RF=3")
    ap.add_argument("--no-mock", action="store_true",
                    help="skip the reference rounds against librdkafka's mock broker")
    add_summary_option(ap)
    args = ap.parse_args()
    where = "RF=3" if args.cluster else "standalone"
    with (cluster() if args.cluster else standalone()) as (bootstrap, rf):
        _topic(bootstrap, "warm", rf)
        transactional(bootstrap, "warm", TXN_RECORDS, "warm")  # creates __transaction_state
        idems, txns = rounds(bootstrap, rf, args.records, args.rounds, where)
        idem, txn = statistics.median(idems), statistics.median(txns)
        _topic(bootstrap, "endtxn", rf)
        lat = end_txn_latencies(bootstrap, "endtxn", args.commits, "bench-endtxn")
    ratio = median_ratio(txns, idems)
    mock = None
    if not args.no_mock:  # the client's own ceiling: the same runs, no broker to speak of
        mock = median_ratio(*reversed(rounds(None, 1, args.records, args.rounds,
                                             "librdkafka's mock broker")))
    p50, p99 = pct(lat, 0.5) * 1000, pct(lat, 0.99) * 1000
    print(f"{where}: idempotent    : {idem:,.0f} records/s ({args.records:,} records, "
          f"median of {args.rounds} rounds)")
    print(f"{where}: transactional : {txn:,.0f} records/s ({TXN_RECORDS}-record transactions)")
    print(f"{where}: ratio         : {ratio:.2f} (goal >= 0.8)")
    if mock is not None:
        print(f"librdkafka's in-process mock broker, the same runs: ratio {mock:.2f}")
    print(f"{where}: EndTxn        : p50 {p50:.2f} ms, p99 {p99:.2f} ms "
          f"({args.commits} one-record transactions)")
    write_summary(args.summary_json, [
        Row("32 transactions", f"transactional producer (librdkafka, {where}), records/s",
            txn, "records/s", "the same producer idempotent-only", idem, ratio, ">= 0.8x",
            ratio >= 0.8),
        *([] if mock is None else [Row(
            "32 transactions", "the same ratio against librdkafka's in-process mock broker",
            mock, "x", target="(the client's own ceiling)")]),
        Row("32 transactions", f"EndTxn latency p50 ({where})", p50, "ms"),
        Row("32 transactions", f"EndTxn latency p99 ({where})", p99, "ms"),
    ])


if __name__ == "__main__":
    main()
