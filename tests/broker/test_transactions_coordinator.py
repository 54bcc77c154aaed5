"""The transaction coordinator on a standalone broker, with real clients (issue 32):
commit and abort, zombie fencing, the timeout abort, the expiry of idle ids, a restart in
the middle, and every error of bad input (checked on the wire, nothing written that should
not be). What the log holds is read from the data dir (tests/broker/txn_helpers.py): the
markers each partition got and the `__transaction_state` records of each id."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess
from tests.polling import wait_until

from .txn_helpers import committed_values, data_values, markers, txn_states, wait_markers
from .wire import Wire
from .wire import batch as _batch

E = ErrorCode


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here use transactional ids and topics of their own."""
    return module_broker


def _producer(bootstrap: str, txn_id: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                     "linger.ms": 0, **extra})


def _read_committed(bootstrap: str, topic: str, count: int, group: str) -> list[bytes]:
    """What a read_committed confluent-kafka consumer gets from `topic`, up to `count`
    records (or until the partition end)."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    c.subscribe([topic])
    got: list[bytes] = []

    def step() -> bool:
        m = c.poll(0.5)
        if m is None:
            return False
        err = m.error()
        if err is not None:
            return bool(err.code() == -191 and len(got) >= count)  # _PARTITION_EOF
        got.append(m.value() or b"")
        return len(got) > count

    try:
        wait_until(step, 30, f"{count} committed records of {topic}")
    finally:
        c.close()
    return got


def test_confluent_commit_and_abort(broker: BrokerProcess) -> None:
    topic, tid = "txn-commit-abort", "tid-commit-abort"
    with Wire(broker.bootstrap) as w:
        w.create_topic(topic)
    p = _producer(broker.bootstrap, tid)
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"c{i}".encode())
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"a{i}".encode())
    p.flush(30)  # the aborted records reach the log
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"c-last")
    p.commit_transaction(30)

    d = broker.data_dir
    got = wait_markers(d, topic, 3, 10)
    assert [m[0] for m in got] == ["COMMIT", "ABORT", "COMMIT"]
    pid, epoch = got[0][1], got[0][2]
    assert all(m[1:] == (pid, epoch) for m in got)
    assert data_values(d, topic) == [b"c0", b"c1", b"c2", b"c3", b"c4", b"a0", b"a1", b"a2",
                                     b"c-last"]
    assert committed_values(d, topic) == [b"c0", b"c1", b"c2", b"c3", b"c4", b"c-last"]
    states = wait_until(lambda: (s := txn_states(d, tid))[-1] == "CompleteCommit" and s, 10,
                        "CompleteCommit written")
    assert states == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit",
                      "Ongoing", "PrepareAbort", "CompleteAbort",
                      "Ongoing", "PrepareCommit", "CompleteCommit"]
    assert _read_committed(broker.bootstrap, topic, 6, "g-commit-abort") == \
        committed_values(d, topic)


def test_zombie_fenced(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException

    topic, tid = "txn-zombie", "tid-zombie"
    with Wire(broker.bootstrap) as w:
        w.create_topic(topic)
    zombie = _producer(broker.bootstrap, tid)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie-1")
    zombie.flush(30)
    fresh = _producer(broker.bootstrap, tid)
    fresh.init_transactions(30)  # aborts the zombie's transaction, bumps the epoch
    fresh.begin_transaction()
    fresh.produce(topic, b"fresh-1")
    fresh.commit_transaction(30)
    zombie.produce(topic, b"zombie-2")
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(30)
    err = info.value.args[0]
    assert err.fatal() or err.txn_requires_abort(), err
    assert err.code() in (E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH, -144), err  # -144: _FENCED

    d = broker.data_dir
    ms = wait_markers(d, topic, 2, 10)
    assert [m[0] for m in ms] == ["ABORT", "COMMIT"]
    # one producer id: the abort fenced the zombie (epoch 0 -> 1), the fresh one has 2
    assert (ms[0][1:], ms[1][1:]) == ((ms[0][1], 1), (ms[0][1], 2))
    assert b"zombie-2" not in data_values(d, topic)  # refused: fenced epoch
    assert committed_values(d, topic) == [b"fresh-1"]
    assert _read_committed(broker.bootstrap, topic, 1, "g-zombie") == [b"fresh-1"]


def test_restart_keeps_the_producer_id(broker_factory: Any) -> None:
    b = broker_factory()
    with Wire(b.bootstrap) as w:
        first = _init(w, "tid-restart")
        assert first["error_code"] == 0 and first["producer_epoch"] == 0
    b.restart()
    with Wire(b.bootstrap) as w:
        again = wait_until(lambda: (r := _init(w, "tid-restart"))["error_code"] == 0 and r, 20,
                           "InitProducerId after the restart")
    assert again["producer_id"] == first["producer_id"]
    assert again["producer_epoch"] == 1


def _init(w: Wire, tid: str, timeout_ms: int = 60000, version: int = 4,
          pid: int = -1, epoch: int = -1) -> dict[str, Any]:
    body: dict[str, Any] = {"transactional_id": tid, "transaction_timeout_ms": timeout_ms}
    if version >= 3:
        body.update(producer_id=pid, producer_epoch=epoch)
    r = w.request(ApiKey.FIND_COORDINATOR, 3, {"key": tid, "key_type": 1})
    assert r["error_code"] == 0, r
    return w.request(ApiKey.INIT_PRODUCER_ID, version, body)


def _add(w: Wire, tid: str, pid: int, epoch: int, tps: dict[str, list[int]],
         version: int = 3) -> dict[tuple[str, int], int]:
    r = w.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in tps.items()]})
    return {(t["name"], p["partition_index"]): p["partition_error_code"]
            for t in r["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}


def _end(w: Wire, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return int(w.request(ApiKey.END_TXN, version, {
        "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
        "committed": commit})["error_code"])


def test_bad_input_wire(broker: BrokerProcess) -> None:
    topic, tid = "txn-bad-input", "tid-bad-input"
    d = broker.data_dir
    with Wire(broker.bootstrap) as w:
        w.create_topic(topic)
        # timeouts: above transaction.max.timeout.ms (900000), zero
        assert _init(w, tid, timeout_ms=900001)["error_code"] == E.INVALID_TRANSACTION_TIMEOUT
        assert _init(w, tid, timeout_ms=0)["error_code"] == E.INVALID_TRANSACTION_TIMEOUT
        assert txn_states(d, tid) == []  # nothing written
        # an empty id; an id with a producer id but no epoch (v3+)
        assert w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": "", "transaction_timeout_ms": 1000, "producer_id": -1,
            "producer_epoch": -1})["error_code"] == E.INVALID_REQUEST
        assert _init(w, tid, pid=5, epoch=-1)["error_code"] == E.INVALID_REQUEST
        r = _init(w, tid)
        assert r["error_code"] == 0
        pid, epoch = r["producer_id"], r["producer_epoch"]
        written = len(txn_states(d, tid))
        # EndTxn without AddPartitions
        assert _end(w, tid, pid, epoch, True) == E.INVALID_TXN_STATE
        assert _end(w, tid, pid, epoch, False) == E.INVALID_TXN_STATE
        # wrong producer id, wrong epoch (PRODUCER_FENCED from v2, before INVALID_PRODUCER_EPOCH)
        assert _end(w, tid, pid + 1000, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
        assert _end(w, tid, pid, epoch + 1, True) == E.PRODUCER_FENCED
        assert _end(w, tid, pid, epoch + 1, True, version=1) == E.INVALID_PRODUCER_EPOCH
        assert set(_add(w, tid, pid, epoch + 1, {topic: [0]}).values()) == {E.PRODUCER_FENCED}
        assert set(_add(w, tid, pid, epoch + 1, {topic: [0]}, version=1).values()) == \
            {E.INVALID_PRODUCER_EPOCH}
        assert set(_add(w, "tid-unknown", pid, epoch, {topic: [0]}).values()) == \
            {E.INVALID_PRODUCER_ID_MAPPING}
        # a missing partition fails the request; the good one is not attempted
        assert _add(w, tid, pid, epoch, {topic: [0, 7], "no-such-topic": [0]}) == {
            (topic, 0): E.OPERATION_NOT_ATTEMPTED, (topic, 7): E.UNKNOWN_TOPIC_OR_PARTITION,
            ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        # internal topics are never added by a client
        assert _add(w, tid, pid, epoch, {"__consumer_offsets": [0]}) == {
            ("__consumer_offsets", 0): E.TOPIC_AUTHORIZATION_FAILED}
        # AddOffsetsToTxn: the same checks (its partition is the group's offsets partition)
        for args, want in (((pid, epoch + 1, 3), E.PRODUCER_FENCED),
                           ((pid, epoch + 1, 1), E.INVALID_PRODUCER_EPOCH),
                           ((pid + 1000, epoch, 3), E.INVALID_PRODUCER_ID_MAPPING)):
            p_, e_, v_ = args
            assert w.request(ApiKey.ADD_OFFSETS_TO_TXN, v_, {
                "transactional_id": tid, "producer_id": p_, "producer_epoch": e_,
                "group_id": "g-bad"})["error_code"] == want
        assert len(txn_states(d, tid)) == written  # none of that was written
        # a control batch from a client is refused
        from .wire import batch

        control = batch([b"\x00\x00\x00\x00"], producer_id=pid, producer_epoch=epoch,
                        is_control=True, is_transactional=True)
        assert w.produce(topic, control)["error_code"] != 0
        # a good transaction; then the opposite EndTxn is INVALID_TXN_STATE
        assert _add(w, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        assert _end(w, tid, pid, epoch, True) == 0
        assert _end(w, tid, pid, epoch, False) == E.INVALID_TXN_STATE
        # the same commit again: done (a request waits for the markers of the last one)
        assert _end(w, tid, pid, epoch, True) == 0
        wait_until(lambda: txn_states(d, tid)[-1] == "CompleteCommit", 10, "CompleteCommit")
        assert txn_states(d, tid)[written:] == ["Ongoing", "PrepareCommit", "CompleteCommit"]
        # an ongoing transaction and a second InitProducerId: it is aborted first, the
        # caller is told to retry (CONCURRENT_TRANSACTIONS), then gets the next epoch
        assert _add(w, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        assert _init(w, tid)["error_code"] == E.CONCURRENT_TRANSACTIONS
        again = wait_until(lambda: (r := _init(w, tid))["error_code"] == 0 and r, 10,
                           "InitProducerId after the abort")
        assert again["producer_id"] == pid and again["producer_epoch"] == epoch + 2
        assert markers(d, topic)[-1] == ("ABORT", pid, epoch + 1)
        # the old epoch is fenced
        assert _end(w, tid, pid, epoch, True) == E.PRODUCER_FENCED
        # KIP-360: a bump with the current producer id and epoch
        bumped = _init(w, tid, pid=pid, epoch=epoch + 2)
        assert (bumped["error_code"], bumped["producer_epoch"]) == (0, epoch + 3)
        # ... and with a stale epoch
        assert _init(w, tid, pid=pid, epoch=epoch)["error_code"] == E.PRODUCER_FENCED
        assert _init(w, tid, pid=pid, epoch=epoch, version=3)["error_code"] == \
            E.INVALID_PRODUCER_EPOCH
        # the broker keeps serving
        assert w.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})[
            "error_code"] == 0


def test_find_coordinator_transactions(broker: BrokerProcess) -> None:
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    with Wire(broker.bootstrap) as w:
        for version in (0, 1, 2, 3):
            r = w.request(ApiKey.FIND_COORDINATOR, version, {"key": "t", "key_type": 1})
            assert (r["error_code"], r["node_id"], r["port"]) == (0, 0, port), r
        r = w.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1,
                                                   "coordinator_keys": ["a", "b", ""]})
        assert [(c["key"], c["error_code"]) for c in r["coordinators"]] == [
            ("a", 0), ("b", 0), ("", E.INVALID_REQUEST)]
        assert w.request(ApiKey.FIND_COORDINATOR, 3, {"key": "t", "key_type": 7})[
            "error_code"] == E.INVALID_REQUEST


def test_timed_out_transaction_aborted(broker_factory: Any) -> None:
    from confluent_kafka import KafkaException

    b = broker_factory(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    topic, tid = "txn-timeout", "tid-timeout"
    with Wire(b.bootstrap) as w:
        w.create_topic(topic)
    p = _producer(b.bootstrap, tid, **{"transaction.timeout.ms": 1000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"late")
    p.flush(30)
    ms = wait_markers(b.data_dir, topic, 1, 20)
    assert [m[0] for m in ms] == ["ABORT"]
    assert ms[0][2] == 1  # written with the bumped epoch: the producer is fenced
    assert committed_values(b.data_dir, topic) == []
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    assert txn_states(b.data_dir, tid)[-2:] == ["PrepareAbort", "CompleteAbort"]


def test_idle_transactional_id_expires(broker_factory: Any) -> None:
    b = broker_factory(**{"transactional.id.expiration.ms": "300",
                          "transaction.remove.expired.transaction.cleanup.interval.ms": "100"})
    with Wire(b.bootstrap) as w:
        assert _init(w, "tid-expire")["error_code"] == 0
        wait_until(lambda: txn_states(b.data_dir, "tid-expire")[-1:] == [None], 20,
                   "the tombstone")
        r = w.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tid-expire"]})
        assert r["transaction_states"][0]["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND


def test_offsets_committed_in_the_transaction(broker: BrokerProcess) -> None:
    """KIP-447's consume-transform-produce: AddOffsetsToTxn puts the group's
    __consumer_offsets partition in the transaction, and its marker makes the offsets
    committed (commit) or drops them (abort)."""
    from confluent_kafka import Consumer, TopicPartition

    src, dst, tid, group = "txn-cp-in", "txn-cp-out", "tid-cp", "g-cp"
    with Wire(broker.bootstrap) as w:
        w.create_topic(src)
        w.create_topic(dst)
        for i in range(10):
            w.produce(src, _batch([f"in{i}".encode()]))
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    c.assign([TopicPartition(src, 0, 0)])
    p = _producer(broker.bootstrap, tid)
    p.init_transactions(30)

    def step(n: int, commit: bool) -> None:
        got: list[Any] = []
        wait_until(lambda: (m := c.poll(0.5)) is not None and not m.error() and
                   bool(got.append(m)) or len(got) >= n, 30, f"{n} input records")
        p.begin_transaction()
        for m in got:
            p.produce(dst, (m.value() or b"").replace(b"in", b"out"))
        p.send_offsets_to_transaction([TopicPartition(src, 0, got[-1].offset() + 1)],
                                      c.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(30)
            p.abort_transaction(30)

    def committed() -> int:
        (tp,) = c.committed([TopicPartition(src, 0)], 30)
        return int(tp.offset)

    step(4, True)
    assert wait_until(lambda: committed() == 4, 10, "offset 4 committed")
    c.seek(TopicPartition(src, 0, 4))
    step(3, False)
    assert committed() == 4  # the aborted transaction's offsets are dropped
    c.close()
    offsets_partition = next(
        int(d.name.rsplit("-", 1)[1]) for d in broker.data_dir.glob("__consumer_offsets-*")
        if markers(broker.data_dir, "__consumer_offsets", int(d.name.rsplit("-", 1)[1])))
    assert [m[0] for m in markers(broker.data_dir, "__consumer_offsets",
                                  offsets_partition)] == ["COMMIT", "ABORT"]
    assert committed_values(broker.data_dir, dst) == [b"out0", b"out1", b"out2", b"out3"]


def test_transaction_open_at_a_crash_is_aborted_after_restart(broker_factory: Any) -> None:
    """SIGKILL with a transaction open: the restarted coordinator loads it from
    __transaction_state (Ongoing, its partitions, its start time) and aborts it once its
    timeout has passed; read_committed consumers then read past it."""
    b = broker_factory(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    topic, tid = "txn-crash", "tid-crash"
    with Wire(b.bootstrap) as w:
        w.create_topic(topic)
    p = _producer(b.bootstrap, tid, **{"transaction.timeout.ms": 3000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"open-at-crash")
    p.flush(30)
    assert txn_states(b.data_dir, tid)[-1] == "Ongoing"
    b.kill()
    b.start()
    ms = wait_markers(b.data_dir, topic, 1, 30)
    assert ms == [("ABORT", ms[0][1], 1)]  # the producer fenced: epoch 0 -> 1
    wait_until(lambda: txn_states(b.data_dir, tid)[-1] == "CompleteAbort", 10, "CompleteAbort")
    with Wire(b.bootstrap) as w:
        w.produce(topic, _batch([b"after"]))
    assert _read_committed(b.bootstrap, topic, 1, "g-crash") == [b"after"]


def test_add_partitions_v4_verify_and_add(broker: BrokerProcess) -> None:
    """AddPartitionsToTxn v4+ (KIP-890, sent by partition leaders): batched over
    transactions; verify_only answers whether each partition is in the transaction without
    adding it."""
    topic, tid = "txn-verify", "tid-verify"
    with Wire(broker.bootstrap) as w:
        w.create_topic(topic, partitions=3)
        r = _init(w, tid)
        pid, epoch = r["producer_id"], r["producer_epoch"]

        def v4(verify: bool, parts: list[int], e: int = epoch) -> dict[int, int]:
            resp = w.request(ApiKey.ADD_PARTITIONS_TO_TXN, 5, {"transactions": [{
                "transactional_id": tid, "producer_id": pid, "producer_epoch": e,
                "verify_only": verify, "topics": [{"name": topic, "partitions": parts}]}]})
            assert resp["error_code"] == 0
            (txn,) = resp["results_by_transaction"]
            return {p["partition_index"]: p["partition_error_code"]
                    for t in txn["topic_results"] for p in t["results_by_partition"]}

        assert v4(True, [0]) == {0: E.INVALID_TXN_STATE}  # no transaction yet
        assert v4(False, [0, 1]) == {0: 0, 1: 0}  # added (v4 without verify_only)
        assert v4(True, [0, 1, 2]) == {0: 0, 1: 0, 2: E.INVALID_TXN_STATE}
        assert v4(True, [0], e=epoch + 1) == {0: E.PRODUCER_FENCED}
        assert txn_states(broker.data_dir, tid)[-1] == "Ongoing"  # verify wrote nothing
        assert _end(w, tid, pid, epoch, False) == 0


def test_list_transactions_filters(broker: BrokerProcess) -> None:
    topic, tid = "txn-list", "tid-list"
    with Wire(broker.bootstrap) as w:
        w.create_topic(topic)
        r = _init(w, tid)
        pid, epoch = r["producer_id"], r["producer_epoch"]
        assert _add(w, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}

        def listed(**body: Any) -> list[str]:
            resp = w.request(ApiKey.LIST_TRANSACTIONS, 1, {
                "state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                **body})
            assert resp["error_code"] == 0
            return [t["transactional_id"] for t in resp["transaction_states"]]

        assert tid in listed()
        assert listed(producer_id_filters=[pid]) == [tid]
        assert tid in listed(state_filters=["Ongoing"])
        assert tid not in listed(state_filters=["Empty", "CompleteCommit"])
        assert tid in listed(duration_filter=0)
        assert tid not in listed(duration_filter=3_600_000)
        resp = w.request(ApiKey.LIST_TRANSACTIONS, 0, {
            "state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [pid]})
        assert resp["unknown_state_filters"] == ["Bogus"]
        assert [t["transaction_state"] for t in resp["transaction_states"]] == ["Ongoing"]
        r2 = w.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid, "nope"]})
        assert [(s["transactional_id"], s["error_code"], s["transaction_state"])
                for s in r2["transaction_states"]] == [
            (tid, 0, "Ongoing"), ("nope", E.TRANSACTIONAL_ID_NOT_FOUND, "")]
        assert r2["transaction_states"][0]["topics"] == [{"topic": topic, "partitions": [0]}]
        assert _end(w, tid, pid, epoch, True) == 0


def test_partition_count_of_the_existing_topic_wins(broker_factory: Any) -> None:
    """transaction.state.log.num.partitions changed after __transaction_state was made:
    ids keep mapping to the partitions the topic has (their state is found)."""
    b = broker_factory()
    with Wire(b.bootstrap) as w:
        first = _init(w, "tid-count")
        assert first["error_code"] == 0
    b.stop()
    b.overrides["transaction.state.log.num.partitions"] = "5"
    b.start()
    with Wire(b.bootstrap) as w:
        again = wait_until(lambda: (r := _init(w, "tid-count"))["error_code"] == 0 and r, 20,
                           "InitProducerId after the restart")
    assert (again["producer_id"], again["producer_epoch"]) == (first["producer_id"], 1)
    assert "using the topic's count" in b.log()


def test_requests_before_find_coordinator_are_not_coordinator(broker_factory: Any) -> None:
    """A fresh broker has no __transaction_state until a FindCoordinator(TRANSACTION) makes
    it: transaction requests before that answer NOT_COORDINATOR (as Kafka's) and create
    nothing."""
    b = broker_factory()
    with Wire(b.bootstrap) as w:
        r = w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": "early", "transaction_timeout_ms": 1000, "producer_id": -1,
            "producer_epoch": -1})
        assert r["error_code"] == E.NOT_COORDINATOR
        assert _end(w, "early", 0, 0, True) == E.NOT_COORDINATOR
        r = w.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["early"]})
        assert r["transaction_states"][0]["error_code"] == E.NOT_COORDINATOR
        assert not list(b.data_dir.glob("__transaction_state-*"))
        assert _init(w, "early")["error_code"] == 0  # FindCoordinator first: served
    assert len(list(b.data_dir.glob("__transaction_state-*"))) == 50
