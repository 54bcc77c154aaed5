"""Every broker's metadata stays the controller's, now that UpdateMetadata is incremental:
three real brokers on a real ZooKeeper go through topic creation, produce (ISR changes),
a clean broker restart, added partitions, a topic deletion and a controller kill and
restart; after each step every live broker's Metadata answer (topics, partitions, leader,
replicas, ISR) equals what the controller wrote to ZooKeeper."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster import zookeeper as zkmod
from tests import zygote
from tests.cluster.cluster_helpers import Cluster, metadata, start_cluster
from tests.polling import wait_until

AGREE_S = 30.0
Description = dict[str, dict[int, tuple[int, list[int], list[int]]]]


@pytest.fixture
def cluster(broker_factory, zookeeper) -> Cluster:  # type: ignore[no-untyped-def]
    return start_cluster(broker_factory, zookeeper)


def kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=60)


def controller_view(zk: Any) -> Description:
    """topic -> partition -> (leader, replicas, ISR), as the controller wrote them (topics
    marked for deletion left out)."""
    deleting = set(zk_topics.topics_to_delete(zk))
    names = [n for n in zk_topics.topic_names(zk) if n not in deleting]
    out: Description = {}
    for name, assignment in zk_topics.read_assignments(zk, names).items():
        if assignment is None:
            continue
        states = zk_topics.read_partition_states(zk, [(name, p) for p in assignment.partitions])
        out[name] = {}
        for (_, p), state in states.items():
            leader, isr = (state.leader, sorted(state.isr)) if state else (-1, [])
            out[name][p] = (leader, list(assignment.partitions[p]), isr)
    return out


def broker_view(port: int) -> Description:
    md = metadata(port)
    return {t["name"]: {p["partition_index"]: (p["leader_id"], list(p["replica_nodes"]),
                                               sorted(p["isr_nodes"]))
                        for p in t["partitions"]}
            for t in md["topics"] if t["error_code"] == 0 and not t["name"].startswith("__")}


def agreed(cluster: Cluster, zk: Any, what: str) -> Description:
    """Wait until every live broker answers the controller's view; returns it."""
    seen: dict[str, Any] = {}

    def check() -> Description | None:
        want = {t: parts for t, parts in controller_view(zk).items()
                if not t.startswith("__")}
        seen["controller"] = want
        for b in cluster.live():
            got = broker_view(b.port)
            seen[str(b.port)] = got
            if got != want:
                return None
        return want
    try:
        return wait_until(check, AGREE_S, what)
    except AssertionError as e:
        raise AssertionError(f"{e}: {seen}") from None


def test_every_broker_agrees_with_the_controller_through_a_sequence_of_changes(
        cluster: Cluster) -> None:
    zk = zkmod.connect(cluster.zookeeper_connect, timeout_s=10)
    try:
        for name, parts, rf in (("a", 6, 3), ("b", 3, 2), ("c", 4, 2)):
            r = kafkactl("topics", "create", "-b", cluster.bootstrap, "-t", name,
                         "--partitions", str(parts), "--replication-factor", str(rf))
            assert r.returncode == 0, r.stderr
        view = agreed(cluster, zk, "the topics created")
        assert sorted(view) == ["a", "b", "c"]
        assert all(lead >= 0 for parts in view.values() for lead, _, _ in parts.values())

        def produce() -> None:
            for name in ("a", "c"):
                r = zygote.run(["produce", "-b", cluster.bootstrap, "-t", name, "-q"],
                               text=True, timeout=60, input="one\ntwo\nthree\n")
                assert r.returncode == 0, r.stderr

        # a clean restart of a broker that is not the controller: leaders move away, the
        # ISRs shrink, then it rejoins (a full UpdateMetadata) and catches up (ISRs grow)
        controller = cluster.controller()
        other = next(b for b in cluster.brokers if b != controller)
        cluster.brokers[other].stop()
        view = agreed(cluster, zk, f"broker {other} stopped")
        assert all(other not in isr for parts in view.values() for _, _, isr in parts.values())
        produce()
        cluster.brokers[other].start()
        view = agreed(cluster, zk, f"broker {other} back")
        wait_until(lambda: all(other in isr for parts in controller_view(zk).values()
                               for _, reps, isr in parts.values() if other in reps),
                   AGREE_S, f"broker {other} back in every ISR")
        agreed(cluster, zk, "the ISRs grown again")

        # partitions added, a topic deleted
        r = kafkactl("topics", "alter", "-b", cluster.bootstrap, "-t", "a", "--partitions", "9")
        assert r.returncode == 0, r.stderr
        r = kafkactl("topics", "delete", "-b", cluster.bootstrap, "-t", "b")
        assert r.returncode == 0, r.stderr
        wait_until(lambda: "b" not in zk_topics.topic_names(zk), AGREE_S, "b deleted")
        view = agreed(cluster, zk, "a grown and b deleted")
        assert sorted(view) == ["a", "c"] and sorted(view["a"]) == list(range(9))

        # the controller killed: a new one sends every broker a full UpdateMetadata
        cluster.brokers[controller].kill()
        wait_until(lambda: cluster.controller() not in (-1, controller), AGREE_S,
                   "a new controller")
        agreed(cluster, zk, "a new controller")
        cluster.brokers[controller].start()
        produce()
        view = agreed(cluster, zk, "the old controller back")
        assert sorted(view) == ["a", "c"]
        for b in cluster.live():
            assert metadata(b.port, [])["controller_id"] == cluster.controller()
    finally:
        zkmod.close(zk)
