"""read_committed against read_uncommitted on the same transactional topic (issue 32's
"read_committed consumer >= 0.9x read_uncommitted"), in the same run.

The topic is written through the broker's own paths: transactional batches of 1,000
records (100 B values; 10 producers taking turns) by Produce with a transactional_id, each
ended by a WriteTxnMarkers marker as the coordinator sends them, one in ten aborted. A
librdkafka consumer (confluent-kafka) then reads the whole partition to its end, once
read_uncommitted and once read_committed (which drops the aborted transactions using the
Fetch response's aborted_transactions and is bounded by the LSO), best of `--rounds`.
The figure is the offsets covered per second; the ratio is read_committed over
read_uncommitted.

    python bench/read_committed.py [--transactions 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import socket
import time

from broker_common import start_broker
from confluent_kafka import Consumer, KafkaError, TopicPartition
from summary import Row, add_summary_option, write_summary

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.batch import RecordBatchBuilder

TOPIC = "txn-bench"
RECORDS_PER_TXN = 1000
PRODUCERS = 10


class WireConn:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.cid = 0

    def request(self, key: ApiKey, version: int, body: dict) -> dict:
        self.cid += 1
        self.sock.sendall(codec.encode_request(key, version, self.cid, "bench", body))
        head = self._exact(4)
        return codec.decode_response(key, version, self._exact(int.from_bytes(head, "big")))

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)


def fill(bootstrap: str, transactions: int) -> tuple[int, int]:
    """(the log end offset, records in aborted transactions)."""
    w = WireConn(bootstrap)
    seqs = [0] * PRODUCERS
    value = b"v" * 100
    aborted = 0
    for t in range(transactions):
        p = t % PRODUCERS
        pid = 70_000 + p
        b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seqs[p],
                               is_transactional=True)
        b.append_values([value] * RECORDS_PER_TXN)
        seqs[p] += RECORDS_PER_TXN
        r = w.request(ApiKey.PRODUCE, 9, {
            "transactional_id": f"bench-{p}", "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [
                {"index": 0, "records": b.build()}]}]})
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
        commit = t % 10 != 9
        aborted += 0 if commit else RECORDS_PER_TXN
        m = w.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": pid, "producer_epoch": 0, "transaction_result": commit,
            "coordinator_epoch": 0, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}]})
        assert m["markers"][0]["topics"][0]["partitions"][0]["error_code"] == 0
    return transactions * (RECORDS_PER_TXN + 1), aborted


def consume(bootstrap: str, isolation: str) -> tuple[int, float]:
    """(records delivered, seconds) reading the partition from 0 to its end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{isolation}",
                  "isolation.level": isolation, "enable.partition.eof": True,
                  "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                  "max.partition.fetch.bytes": 8 << 20, "queued.max.messages.kbytes": 1 << 20,
                  "queued.min.messages": 2_000_000, "fetch.queue.backoff.ms": 1})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    n = 0
    t0 = time.perf_counter()
    try:
        while True:
            msgs = c.consume(10000, 10)
            if not msgs:
                raise RuntimeError("consumer stalled")
            for m in msgs:
                err = m.error()
                if err is None:
                    n += 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    return n, time.perf_counter() - t0
                else:
                    raise RuntimeError(str(err))
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transactions", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    add_summary_option(ap)
    args = ap.parse_args()
    # hand-built transactions (Produce + WriteTxnMarkers, no coordinator behind them): the
    # log side alone, so without the leader's KIP-890 check, which would refuse them
    broker = start_broker("transaction.partition.verification.enable=false")
    try:
        end, aborted = fill(broker.bootstrap, args.transactions)
        consume(broker.bootstrap, "read_uncommitted")  # page cache and connections warm
        ru = rc = float("inf")
        n_ru = n_rc = 0
        cpu_ru = cpu_rc = 0.0
        for _ in range(args.rounds):
            cpu0 = broker.cpu_seconds()
            n_ru, dt = consume(broker.bootstrap, "read_uncommitted")
            cpu_ru += broker.cpu_seconds() - cpu0
            ru = min(ru, dt)
            cpu0 = broker.cpu_seconds()
            n_rc, dt = consume(broker.bootstrap, "read_committed")
            cpu_rc += broker.cpu_seconds() - cpu0
            rc = min(rc, dt)
    finally:
        broker.stop()
    assert n_ru == args.transactions * RECORDS_PER_TXN, n_ru
    assert n_rc == n_ru - aborted, (n_rc, n_ru, aborted)
    ru_rate, rc_rate = end / ru, end / rc
    ratio = rc_rate / ru_rate
    print(f"topic            : {end:,} offsets, {args.transactions:,} transactions of "
          f"{RECORDS_PER_TXN} records, {aborted:,} records aborted")
    print(f"read_uncommitted : {ru_rate:,.0f} offsets/s ({n_ru:,} records in {ru:.2f} s)")
    print(f"read_committed   : {rc_rate:,.0f} offsets/s ({n_rc:,} records in {rc:.2f} s)")
    print(f"broker CPU       : {cpu_ru / args.rounds:.2f} s a read_uncommitted pass, "
          f"{cpu_rc / args.rounds:.2f} s a read_committed pass")
    print(f"ratio            : {ratio:.2f} (goal >= 0.9)")
    write_summary(args.summary_json, [Row(
        "32 transactions", "read_committed consumer (librdkafka), offsets/s", rc_rate,
        "offsets/s", "read_uncommitted on the same topic", ru_rate, ratio, ">= 0.9x",
        ratio >= 0.9)])


if __name__ == "__main__":
    main()
