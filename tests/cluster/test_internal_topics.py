"""Only Kafka's internal topics (Topic.java: __consumer_offsets, __transaction_state) are
internal: a user's topic whose name starts with `__` (Debezium's `__debezium-heartbeat.*`)
is an ordinary one in Metadata, standalone and in a cluster, so patterns and tools that
leave internal topics out (a Java consumer's exclude.internal.topics, mirror, consume
--topic-pattern) still see it."""

from __future__ import annotations

from typing import Any

from tests import zygote
from tests.cluster.cluster_helpers import metadata, start_cluster


def _internal(port: int) -> dict[str, bool]:
    return {t["name"]: t["is_internal"] for t in metadata(port)["topics"]}


def _make(bootstrap: str, topic: str) -> None:
    r = zygote.run(["topics", "create", "-b", bootstrap, "-t", topic], text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_a_user_topic_starting_with_two_underscores_is_not_internal(module_broker: Any
                                                                    ) -> None:
    b = module_broker.bootstrap
    _make(b, "__custom-heartbeat")
    r = zygote.run(["produce", "-b", b, "-t", "__custom-heartbeat"], input="beat\n",
                   text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # a group's commit makes __consumer_offsets, which stays internal
    r = zygote.run(["consume", "-b", b, "--topic-pattern", "__custom.*", "-G", "hb-reader",
                    "-o", "beginning", "-e"], text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "beat\n", (r.stdout, r.stderr)
    flags = _internal(module_broker.port)
    assert flags["__custom-heartbeat"] is False
    assert flags["__consumer_offsets"] is True


def test_in_a_cluster_too(broker_factory: Any, zookeeper: Any) -> None:
    cluster = start_cluster(broker_factory, zookeeper, ids=(1,))
    _make(cluster.bootstrap, "__custom")
    cluster.wait_for_leaders("__custom", 1)
    assert _internal(cluster.brokers[1].port)["__custom"] is False
