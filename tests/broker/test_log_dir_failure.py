"""New partitions avoid a failing log dir (D7): with log.dirs=a,b and b full (its produces
answer KAFKA_STORAGE_ERROR, DescribeLogDirs says KAFKA_STORAGE_ERROR for it), a topic
created then is placed wholly in a, as Kafka never places a partition in an offline dir;
with every dir failing the creation answers KAFKA_STORAGE_ERROR, until an append shows the
dir works again. It used to put some of the new partitions in b, whose produces failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode

from .test_disk_full import fill_disk, free_disk, partition_dirs, tmpfs  # noqa: F401
from .wire import Wire, batch


def _fail_a_produce(w: Wire, topic: str) -> None:
    r = w.produce(topic, batch([b"z" * 20000]))
    assert r["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR, r


def _log_dir_errors(w: Wire) -> dict[str, int]:
    resp = w.request(ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None})
    return {Path(r["log_dir"]).name: r["error_code"] for r in resp["results"]}


def test_new_partitions_go_to_the_log_dirs_that_work(tmpfs: Path, broker_factory: Any,  # noqa: F811
                                                    tmp_path: Path) -> None:
    disk = tmp_path / "big-disk"
    broker = broker_factory(log_dirs=f"{disk},{tmpfs}", offsets_topic_num_partitions="1",
                            auto_create_topics_enable="false")
    with Wire(broker.bootstrap) as w:
        # least-loaded placement: "other" goes to the first dir, "full" to the tmpfs
        assert w.create_topic("other")["error_code"] == 0
        assert w.create_topic("full")["error_code"] == 0
        assert (disk / "other-0").is_dir() and (tmpfs / "full-0").is_dir()
        fill_disk(tmpfs)
        _fail_a_produce(w, "full")
        assert _log_dir_errors(w) == {disk.name: 0, tmpfs.name: ErrorCode.KAFKA_STORAGE_ERROR}

        assert w.create_topic("new", partitions=4)["error_code"] == 0
        assert partition_dirs(tmpfs, "new") == []
        assert partition_dirs(disk, "new") == ["new-0", "new-1", "new-2", "new-3"]
        for p in range(4):
            assert w.produce("new", batch([b"v"]), partition=p)["error_code"] == 0
    assert "Traceback" not in broker.log()


def test_with_every_log_dir_failing_a_creation_is_refused(tmpfs: Path,  # noqa: F811
                                                          broker_factory: Any) -> None:
    broker = broker_factory(log_dirs=str(tmpfs), offsets_topic_num_partitions="1",
                            auto_create_topics_enable="false")
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("full")["error_code"] == 0
        fill_disk(tmpfs)
        _fail_a_produce(w, "full")
        # space comes back, but nothing showed the dir works again: still failing
        free_disk(tmpfs)
        assert _log_dir_errors(w) == {tmpfs.name: ErrorCode.KAFKA_STORAGE_ERROR}
        r = w.create_topic("refused", partitions=2)
        assert r["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR, r
        assert partition_dirs(tmpfs, "refused") == []
        # an append succeeds there: the dir works again and takes new partitions
        assert w.produce("full", batch([b"again"]))["error_code"] == 0
        assert _log_dir_errors(w) == {tmpfs.name: 0}
        assert w.create_topic("refused", partitions=2)["error_code"] == 0
        assert partition_dirs(tmpfs, "refused") == ["refused-0", "refused-1"]
    assert "Traceback" not in broker.log()
