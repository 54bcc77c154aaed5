"""`kafkactl top` (protocol source) on a 3-broker ZooKeeper cluster where a group's
coordinator is paused (SIGSTOP, keeping its ZooKeeper session): the group stays in the
view, its figures not known (state, members, lag: null in JSON, '-' in the table), instead
of vanishing from "groups"; when the coordinator answers again, so do its figures.

The cluster, the paused-broker choice and the live view are test_top_not_answering's."""

from __future__ import annotations

import signal
from typing import Any

from kafkactl.client.group.group_admin import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from tests import zygote
from tests.cli.test_top_not_answering import LiveTop, cluster, spread  # noqa: F401
from tests.cluster.cluster_helpers import Cluster
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture


def _group_coordinated_by(bootstrap: str, broker: int) -> str:
    """A group name whose coordinator is `broker`."""
    client = KafkaClient(bootstrap)
    admin = GroupAdmin(client)
    try:
        for i in range(1000):
            name = f"gtop-{i}"
            if admin.find_coordinator(name)[2] == broker:
                return name
    finally:
        admin.close()
        client.close()
    raise AssertionError(f"no group name coordinated by broker {broker}")


def _group(doc: dict[str, Any], name: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = {g["group"]: g for g in doc["groups"]}.get(name)
    return found


def _known(doc: dict[str, Any], name: str) -> bool:
    """The group is in `doc` with its figures: Empty, lag 0 over all its partitions."""
    g = _group(doc, name)
    return g is not None and g["state"] == "Empty" and g["lag"] == 0 and \
        g["lag_unknown_partitions"] == 0


def test_a_group_whose_coordinator_does_not_answer(
        spread: tuple[Cluster, dict[int, int], int]) -> None:  # noqa: F811 - the fixture
    c, _ports, victim = spread
    group = _group_coordinated_by(c.bootstrap, victim)
    # committed offsets (every record of spread: lag 0), no member: an Empty group
    r = zygote.run(["offsets", "reset", "-G", group, "--topic", "spread", "--to-latest",
                    "--execute", "-b", c.bootstrap], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    view = LiveTop("-b", c.bootstrap)
    paused = c.brokers[victim].proc
    assert paused is not None
    try:
        i = view.wait_for(lambda d: all(b["up"] for b in d["brokers"]) and _known(d, group),
                          f"group {group} in the view")
        paused.send_signal(signal.SIGSTOP)
        try:
            i = view.wait_for(lambda d: not {b["id"]: b for b in d["brokers"]}[victim]["up"],
                              f"broker {victim} not answering", i + 1)
            silent = view.docs[i]
            entry = _group(silent, group)
            # it was there a look ago: still there, nothing of it known
            assert entry is not None, silent["groups"]
            assert entry["state"] is None and entry["members"] is None, entry
            assert entry["lag"] is None and entry["trend"] is None, entry
            assert f"broker {victim}" in entry["error"], entry
        finally:
            paused.send_signal(signal.SIGCONT)
        i = view.wait_for(lambda d: all(b["up"] for b in d["brokers"]), "every broker back",
                          i + 1)
        view.wait_for(lambda d: _known(d, group), f"group {group} known again", i)
    finally:
        view.stop()
