"""`kafkactl mirror --num-streams N`: N worker processes in one consumer group, with the
parent aggregating their status, forwarding SIGTERM and failing when one of them dies."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.group import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.mirror.config import MirrorConfig, MirrorConfigError, parse_num_streams
from kafkactl.mirror.status import MirrorStatus, TopicStatus
from kafkactl.mirror.workers import MirrorWorkers
from tests.mirror.helpers import (
    FAST,
    MirrorProcess,
    assert_nothing_missing,
    assert_same,
    count,
    create_topics,
    mirrored,
    produce,
    read_topic,
    start_mirror,
)
from tests.polling import wait_until

TOPICS = {"dc1.orders": 3, "dc1.clicks": 2, "dc1.audit": 1}


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _committed(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    client = KafkaClient(bootstrap)
    try:
        offsets = GroupAdmin(client).fetch_offsets("kafkactl-mirror",
                                                   [(topic, p) for p in range(partitions)])
        return {p: off for (_t, p), off in offsets.items()}
    finally:
        client.close()


def _workers(m: MirrorProcess, n: int) -> list[int]:
    return wait_until(lambda: len(_children(m.proc.pid)) == n and _children(m.proc.pid), 30,
                      f"{n} worker processes:\n{m.log()}")


def test_workers_share_the_partitions_and_sigterm_commits_everything(
        broker_factory: Any, tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, TOPICS)
    for topic, n in TOPICS.items():
        produce(source.bootstrap, topic, 0, 300, partitions=n)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--whitelist", r"dc1\..*",
                     "--num-streams", "2")
    assert len(_workers(m, 2)) == 2
    total = 300 * len(TOPICS)
    wait_until(lambda: mirrored(m, total), 90, f"{total} records mirrored:\n{m.log()}")

    def settled() -> dict[str, Any] | None:
        st = m.status()  # both workers have an assignment and report it
        if st and st["state"] == "running" and st["lag"] == 0 and sum(
                t["partitions"] for t in st["topics"].values()) == sum(TOPICS.values()):
            return st
        return None

    status = wait_until(settled, 60, f"the aggregated status:\n{m.status()}")
    assert set(status["topics"]) == set(TOPICS) and status["mirrored"] == total
    assert m.terminate() == 0, m.log()
    final = m.status()
    assert final is not None and final["state"] == "stopped" and final["mirrored"] == total
    assert final["error"] is None
    for topic, n in TOPICS.items():
        src = read_topic(source.bootstrap, topic)
        assert_same(src, read_topic(target.bootstrap, topic))
        assert _committed(source.bootstrap, topic, n) == {p: len(r) for p, r in src.items()}


@pytest.mark.parametrize("victim", ["worker", "parent"])
def test_sigkill_mid_stream_loses_nothing(broker_factory: Any, tmp_path: Path,
                                          victim: str) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, TOPICS)
    done = threading.Event()

    def keep_producing() -> None:
        for i in range(30):
            if done.is_set():
                return
            for topic, n in TOPICS.items():
                produce(source.bootstrap, topic, i * 300, 300, partitions=n)

    producer = threading.Thread(target=keep_producing)
    producer.start()
    try:
        m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--whitelist",
                         r"dc1\..*", "--num-streams", "2")
        workers = _workers(m, 2)
        wait_until(lambda: sum(count(target.bootstrap, t) for t in TOPICS
                               if t in _target_topics(target.bootstrap)) >= 2000, 90,
                   f"records in the target:\n{m.log()}")
        if victim == "worker":
            os.kill(workers[0], signal.SIGKILL)
            assert m.proc.wait(90) == 1, m.log()
            assert f"was killed by signal {int(signal.SIGKILL)}" in m.log(), m.log()
            status = m.status()
            assert status is not None and status["state"] == "failed"
        else:
            m.kill()
        # No worker outlives the mirror (a parent killed outright: they stop on their own).
        wait_until(lambda: not any(_alive(w) for w in workers), 60,
                   f"the workers to exit:\n{m.log()}")
    finally:
        done.set()
        producer.join()
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--whitelist", r"dc1\..*",
                     "--num-streams", "2", name="mirror-again")
    wait_until(lambda: (m.status() or {}).get("state") == "running", 60,
               f"the restarted mirror running:\n{m.log()}")
    expected = {t: count(source.bootstrap, t) for t in TOPICS}
    wait_until(lambda: all(sum(max(0, o) for o in _committed(source.bootstrap, t, n).values())
                           == expected[t] for t, n in TOPICS.items()), 120,
               f"the restarted mirror to commit the end of every partition:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    for topic in TOPICS:
        assert_nothing_missing(read_topic(source.bootstrap, topic),
                               read_topic(target.bootstrap, topic))


def _target_topics(bootstrap: str) -> set[str]:
    from kafkactl.client.admin import AdminClient

    with AdminClient(bootstrap) as admin:
        return set(admin.list_topics(include_internal=False))


class _FakeWorker:
    def __init__(self, status: MirrorStatus | None, finished: bool = False,
                 failure: str | None = None) -> None:
        self.status = status
        self._finished = finished
        self._failure = failure

    def done(self) -> bool:
        return self._finished

    def failure(self) -> str | None:
        return self._failure


def _report(state: str, **topics: tuple[int, int, int | None]) -> MirrorStatus:
    st = MirrorStatus(state, "s:1", "t:1", "g")
    for name, (partitions, n, lag) in topics.items():
        st.topics[name] = TopicStatus(name, name + ".copy", partitions, n, 1, 10.0, lag)
    return st


def test_the_status_adds_the_workers_up() -> None:
    workers = MirrorWorkers(MirrorConfig("s:1", "t:1", whitelist=".*", num_streams=2))
    one = _report("running", a=(2, 100, 5), b=(1, 10, None))
    two = _report("starting", a=(1, 50, 0))
    workers.workers = [_FakeWorker(one), _FakeWorker(two)]  # type: ignore[list-item]
    st = workers.status()
    assert st.state == "starting"  # until every worker runs
    assert (st.topics["a"].partitions, st.topics["a"].mirrored, st.topics["a"].lag) == (3, 150, 5)
    assert st.topics["a"].skipped == 2 and st.topics["a"].records_per_sec == 20.0
    assert st.topics["b"].lag is None and st.topics["b"].target_topic == "b.copy"
    assert (st.mirrored, st.skipped, st.lag, st.error) == (160, 3, 5, None)
    two.state = "running"
    assert workers.status().state == "running"
    workers.workers[1] = _FakeWorker(two, finished=True,  # type: ignore[call-overload]
                                     failure="mirror worker 1 was killed by signal 9")
    workers.stopping = True
    st = workers.status()
    assert st.state == "stopping" and st.error == "mirror worker 1 was killed by signal 9"
    assert MirrorStatus.from_json(st.to_json()) == st


def test_num_streams_takes_a_count_or_auto() -> None:
    assert parse_num_streams("3") == 3
    assert 1 <= parse_num_streams("auto") <= 4
    for bad in ("0", "-1", "many"):
        with pytest.raises(MirrorConfigError, match="--num-streams"):
            parse_num_streams(bad)
