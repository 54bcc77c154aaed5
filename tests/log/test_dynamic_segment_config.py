"""A topic's segment settings changed at run time apply at once, as Kafka's do
(`UnifiedLog.updateConfig`): the active segment rolls by the new segment.bytes /
segment.ms at its next append, and new segments take the new segment.index.bytes. They
used to wait for a broker restart: each segment kept the config it was made with and
checked its roll against that."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.protocol.api_keys import ApiKey
from tests.broker.wire import Wire, batch
from tests.log.helpers import FakeTime, make_batch

TOPIC_RESOURCE, SET = 2, 0


def test_a_log_rolls_by_a_segment_bytes_set_after_it_opened(log_dir: Path,
                                                            clock: FakeTime) -> None:
    lg = Log(log_dir, LogConfig(), time=clock)
    lg.append(make_batch(3, value_size=200))
    lg.config = dataclasses.replace(lg.config, segment_bytes=1000)
    lg.append(make_batch(3, value_size=200))
    assert [s.base_offset for s in lg.segments] == [0, 3]
    lg.close()


def test_a_log_rolls_by_a_segment_ms_set_after_it_opened(log_dir: Path,
                                                         clock: FakeTime) -> None:
    lg = Log(log_dir, LogConfig(), time=clock)
    lg.append(make_batch(1, ts=1_000_000))
    lg.append(make_batch(1, ts=1_002_000))  # 2 s later: no roll by the default 7 days
    lg.config = dataclasses.replace(lg.config, segment_ms=1000)
    lg.append(make_batch(1, ts=1_003_000))  # 3 s after the first batch: past 1 s
    assert [s.base_offset for s in lg.segments] == [0, 2]
    lg.close()


def _alter(w: Wire, topic: str, configs: dict[str, str]) -> None:
    resp = w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configs": [
            {"name": k, "config_operation": SET, "value": v} for k, v in configs.items()]}],
        "validate_only": False})
    assert resp["responses"][0]["error_code"] == 0, resp


def _segments(log_dir: Path) -> list[Path]:
    return sorted(log_dir.glob("*.log"))


def test_a_broker_applies_segment_settings_altered_on_an_existing_topic(broker: Any) -> None:
    """The tester's case: segment.bytes altered on a topic made without it; the next
    appends roll at about the new size. segment.index.bytes applies to the new segments
    (the active one made before keeps its index size)."""
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("seg2")["error_code"] == 0
        assert w.produce("seg2", batch([b"x" * 300]))["error_code"] == 0
        log_dir = broker.data_dir / "seg2-0"
        first_index = log_dir / "00000000000000000000.index"
        assert first_index.stat().st_size == LogConfig().segment_index_bytes
        _alter(w, "seg2", {"segment.bytes": "1000", "segment.index.bytes": "4096"})
        for i in range(10):
            assert w.produce("seg2", batch([b"%d" % i + b"x" * 300]))["error_code"] == 0
        segments = _segments(log_dir)
        assert len(segments) >= 4, segments
        assert all(s.stat().st_size <= 1000 for s in segments), segments
        active_index = segments[-1].with_suffix(".index")
        assert active_index.stat().st_size == 4096


def test_a_broker_applies_a_segment_ms_altered_on_an_existing_topic(broker: Any) -> None:
    """segment.ms counts from the first batch's timestamp: records stamped 2 s apart roll
    once segment.ms is set to 1 s (no waiting: the timestamps are the producer's)."""
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("segms")["error_code"] == 0
        t0 = 1_700_000_000_000
        assert w.produce("segms", batch([b"a"], timestamp=t0))["error_code"] == 0
        assert w.produce("segms", batch([b"b"], timestamp=t0 + 1000))["error_code"] == 0
        _alter(w, "segms", {"segment.ms": "1000"})
        assert w.produce("segms", batch([b"c"], timestamp=t0 + 2000))["error_code"] == 0
        names = [p.name for p in _segments(broker.data_dir / "segms-0")]
        assert names == ["00000000000000000000.log", "00000000000000000002.log"]


def test_a_compacted_log_rolls_by_max_compaction_lag_ms(log_dir: Path, clock: FakeTime) -> None:
    """Kafka's maxSegmentMs: min(segment.ms, max.compaction.lag.ms) on a compacted log, so
    a record is cleanable within max.compaction.lag.ms (KIP-354); a log that is not
    compacted rolls by segment.ms alone."""
    for policy, bases in (("compact", [0, 1]), ("delete", [0])):
        d = log_dir.parent / f"{policy}-0"
        lg = Log(d, LogConfig(cleanup_policy=policy, max_compaction_lag_ms=1000), time=clock)
        lg.append(make_batch(1, ts=1_000_000))
        lg.append(make_batch(1, ts=1_002_000))  # 2 s on: past max.compaction.lag.ms
        assert [s.base_offset for s in lg.segments] == bases, policy
        lg.close()


def test_a_batch_larger_than_segment_bytes_is_refused(log_dir: Path, clock: FakeTime) -> None:
    """Kafka's RecordBatchTooLargeException (RECORD_LIST_TOO_LARGE): no segment can hold an
    append larger than segment.bytes. Before: it was stored, a segment past its size."""
    import pytest

    from kafkactl.log.errors import RecordBatchTooLargeError

    lg = Log(log_dir, LogConfig(segment_bytes=2000), time=clock)
    small = make_batch(1, value_size=100)
    lg.append(small)
    big = make_batch(3, value_size=1000)
    with pytest.raises(RecordBatchTooLargeError) as e:
        lg.append(big)
    assert e.value.code == 18 and "segment.bytes (2000)" in str(e.value)
    assert lg.log_end_offset == 1
    lg.append(make_batch(1, value_size=100))  # the log goes on
    assert lg.log_end_offset == 2
    lg.close()
