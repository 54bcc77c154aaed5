"""A topic deleted and created again under the same name starts from nothing: its old
log's checkpoint entries go with it (Kafka's LogManager.asyncDelete rewrites the dir's
recovery-point and log-start-offset checkpoints, and the cleaner drops its
cleaner-offset-checkpoint entry). Real broker processes, SIGKILL.

Also the cross-key check of a topic's effective config (Kafka's LogConfig.validateValues):
min.compaction.lag.ms above max.compaction.lag.ms is INVALID_CONFIG for CreateTopics,
AlterConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from kafkactl.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    read_checkpoint,
)
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.memory_records import RecordBatch, iter_batches
from tests.cluster.conftest import own_zookeeper  # noqa: F401 - the fixture
from tests.polling import wait_until

from .wire import Wire, batch

TOPIC_TYPE = 2  # ConfigResource.Type.TOPIC


def _list_offset(w: Wire, topic: str, timestamp: int) -> int:
    r = w.request(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    p = r["topics"][0]["partitions"][0]
    assert p["error_code"] == 0, p
    return int(p["offset"])


def _delete_topic(w: Wire, topic: str) -> None:
    r = w.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": [topic], "timeout_ms": 10000})
    assert r["responses"][0]["error_code"] == 0, r


def _create_again(w: Wire, topic: str, configs: dict[str, str] | None = None) -> None:
    """Once the deletion is done (TOPIC_ALREADY_EXISTS until then)."""
    def made() -> bool:
        code = w.create_topic(topic, configs=configs)["error_code"]
        assert code in (0, ErrorCode.TOPIC_ALREADY_EXISTS), code
        return code == 0
    wait_until(made, 30, f"{topic} created again")


def _records(w: Wire, topic: str, end: int) -> list[tuple[int, bytes]]:
    """(offset, key) of every record below `end`."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    while offset < end:
        r = w.fetch(topic, offset, partition_max_bytes=1 << 20)
        assert r["error_code"] == 0, r
        data = memoryview(r["records"] or b"")
        got = False
        for b in iter_batches(data):
            if not isinstance(b, RecordBatch) or b.is_control:
                continue
            for rec in b:
                if offset <= rec.offset < end:
                    out.append((rec.offset, bytes(rec.key or b"")))
                    got = True
            offset = max(offset, b.last_offset + 1)
        assert got or offset >= end, (offset, r)
    return out


def test_recreated_topic_keeps_its_acked_records_after_sigkill(broker_factory: Any) -> None:
    """T1's reproduction: DeleteRecords to 30 (log-start checkpoint `t 0 30`), delete the
    topic, make it again, 40 records acknowledged with acks=all, SIGKILL before any periodic
    checkpoint: the restarted log starts at 0 with the 40 records, not at 30."""
    b = broker_factory(log_flush_offset_checkpoint_interval_ms="3600000")
    topic = "reborn"
    with Wire(b.bootstrap) as w:
        assert w.create_topic(topic)["error_code"] == 0
        for i in range(50):
            assert w.produce(topic, batch([b"old-%d" % i]))["error_code"] == 0
        r = w.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": 30}]}], "timeout_ms": 5000})
        assert r["topics"][0]["partitions"][0]["error_code"] == 0, r
        assert read_checkpoint(b.data_dir / LOG_START_OFFSET_CHECKPOINT)[(topic, 0)] == 30
        _delete_topic(w, topic)
        _create_again(w, topic)
        for i in range(40):
            assert w.produce(topic, batch([b"new-%d" % i]), acks=-1)["error_code"] == 0
        assert _list_offset(w, topic, -2) == 0
    b.kill()
    b.start()
    with Wire(b.bootstrap) as w:
        wait_until(lambda: w.fetch(topic, 39)["error_code"] == 0, 20, "the partition loaded")
        assert (_list_offset(w, topic, -2), _list_offset(w, topic, -1)) == (0, 40)
        assert len(_records(w, topic, 40)) == 40


def _produce_keyed(w: Wire, topic: str, rounds: int, prefix: str) -> None:
    for r in range(rounds):
        for k in range(1, 21):
            bb = RecordBatchBuilder()
            bb.append(int(time.time() * 1000), f"{prefix}{k}".encode(), f"v{k}-r{r}".encode())
            assert w.produce(topic, bb.build())["error_code"] == 0


def _active_base(part: Path) -> int:
    """The base offset of the active segment (the newest .log file)."""
    return max(int(p.name.split(".")[0]) for p in part.glob("*.log"))


def _cleaned_to(data_dir: Path, topic: str) -> int | None:
    path = data_dir / CLEANER_OFFSET_CHECKPOINT
    return read_checkpoint(path).get((topic, 0)) if path.exists() else None


def test_recreated_compacted_topic_is_compacted_from_its_first_offset(
        broker_factory: Any) -> None:
    """T1's recreate2.sh: the first topic's cleaner-offset-checkpoint entry must not make
    the new topic's first offsets count as clean (never deduplicated)."""
    b = broker_factory(log_cleaner_backoff_ms="100")
    topic = "reborn-compacted"
    configs = {"cleanup.policy": "compact", "segment.bytes": "1024",
               "min.cleanable.dirty.ratio": "0.01"}
    part = b.data_dir / f"{topic}-0"
    with Wire(b.bootstrap) as w:
        assert w.create_topic(topic, configs=configs)["error_code"] == 0
        _produce_keyed(w, topic, 10, "k")  # offsets 0..199
        first_active = _active_base(part)
        assert first_active > 100
        wait_until(lambda: _cleaned_to(b.data_dir, topic) == first_active, 30,
                   f"the first topic cleaned up to its active segment ({first_active})")
        _delete_topic(w, topic)
        # nothing is cleaned until all of it is written (min.compaction.lag.ms an hour)
        _create_again(w, topic, {**configs, "min.compaction.lag.ms": "3600000"})
        # keys u1..u20 five times each at offsets 0..99, all below the old topic's entry:
        # taken as clean, they would stay five times each
        _produce_keyed(w, topic, 5, "u")
        _produce_keyed(w, topic, 10, "k")  # offsets 100..299
        active = _active_base(part)
        assert active > first_active
        r = w.request(ApiKey.ALTER_CONFIGS, 2, {"resources": [{
            "resource_type": TOPIC_TYPE, "resource_name": topic, "configs": [
                {"name": k, "value": v} for k, v in configs.items()]}],
            "validate_only": False})
        assert r["responses"][0]["error_code"] == 0, r
        wait_until(lambda: _cleaned_to(b.data_dir, topic) == active, 30,
                   f"the new topic cleaned up to its active segment ({active})")
        keys = Counter(key for _o, key in _records(w, topic, active))
        assert {k: n for k, n in keys.items() if n > 1} == {}, \
            "keys below the cleaned offset must each appear once"
        assert {f"u{k}".encode() for k in range(1, 21)} <= set(keys)
        _delete_topic(w, topic)
        wait_until(lambda: w.create_topic(topic)["error_code"] == 0, 30, "made again")
        assert _cleaned_to(b.data_dir, topic) is None


def _error(resp: dict[str, Any]) -> tuple[int, str]:
    return resp["error_code"], resp["error_message"]


CONFLICT = "conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms"


def test_min_compaction_lag_above_max_is_refused(broker_factory: Any) -> None:
    b = broker_factory()
    with Wire(b.bootstrap) as w:
        r = w.request(ApiKey.CREATE_TOPICS, 5, {"topics": [{
            "name": "lags", "num_partitions": 1, "replication_factor": 1, "assignments": [],
            "configs": [{"name": "min.compaction.lag.ms", "value": "5000"},
                        {"name": "max.compaction.lag.ms", "value": "1000"}]}],
            "timeout_ms": 5000, "validate_only": False})["topics"][0]
        assert _error(r) == (ErrorCode.INVALID_CONFIG, f"{CONFLICT} (1000)"), r
        assert w.create_topic("lags", configs={"max.compaction.lag.ms": "1000"})[
            "error_code"] == 0
        r = w.request(ApiKey.ALTER_CONFIGS, 2, {"resources": [{
            "resource_type": TOPIC_TYPE, "resource_name": "lags", "configs": [
                {"name": "min.compaction.lag.ms", "value": "5000"},
                {"name": "max.compaction.lag.ms", "value": "1000"}]}],
            "validate_only": False})["responses"][0]
        assert _error(r) == (ErrorCode.INVALID_CONFIG, f"{CONFLICT} (1000)"), r
        # incremental: the topic keeps max.compaction.lag.ms=1000
        r = w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": TOPIC_TYPE, "resource_name": "lags", "configs": [
                {"name": "min.compaction.lag.ms", "config_operation": 0, "value": "5000"}]}],
            "validate_only": False})["responses"][0]
        assert _error(r) == (ErrorCode.INVALID_CONFIG, f"{CONFLICT} (1000)"), r
        r = w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": TOPIC_TYPE, "resource_name": "lags", "configs": [
                {"name": "min.compaction.lag.ms", "config_operation": 0, "value": "500"}]}],
            "validate_only": False})["responses"][0]
        assert r["error_code"] == 0, r


def test_min_compaction_lag_checked_against_the_broker_default_max(
        broker_factory: Any) -> None:
    """The effective config counts: the topic's overrides over the broker's defaults."""
    b = broker_factory(log_cleaner_max_compaction_lag_ms="1000")
    with Wire(b.bootstrap) as w:
        r = w.create_topic("lags", configs={"min.compaction.lag.ms": "5000"})
        assert _error(r) == (ErrorCode.INVALID_CONFIG, f"{CONFLICT} (1000)"), r
        assert w.create_topic("lags", configs={"min.compaction.lag.ms": "5000",
                                               "max.compaction.lag.ms": "5000"})[
            "error_code"] == 0


def test_min_compaction_lag_above_max_is_refused_in_zookeeper_mode(
        broker_factory: Any, own_zookeeper: Any) -> None:  # noqa: F811 - the fixture
    """The same refusals from a ZooKeeper-mode controller (ZkTopicAdmin)."""
    from tests.cluster.cluster_helpers import start_cluster

    cluster = start_cluster(broker_factory, own_zookeeper, ids=(1,))
    with Wire(cluster.brokers[1].bootstrap) as w:
        r = w.create_topic("lags", configs={"min.compaction.lag.ms": "5000",
                                            "max.compaction.lag.ms": "1000"})
        assert _error(r) == (ErrorCode.INVALID_CONFIG, f"{CONFLICT} (1000)"), r
        assert w.create_topic("lags", configs={"max.compaction.lag.ms": "1000"})[
            "error_code"] == 0
        r = w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": TOPIC_TYPE, "resource_name": "lags", "configs": [
                {"name": "min.compaction.lag.ms", "config_operation": 0, "value": "5000"}]}],
            "validate_only": False})["responses"][0]
        assert _error(r) == (ErrorCode.INVALID_CONFIG, f"{CONFLICT} (1000)"), r
