"""A second throttled `kafkactl rebalance --partitions --execute` while a first throttled move
is still running, on three real brokers. It used to start and replace the topic's
throttled-replicas configs with its own replicas only, so the first move copied
unthrottled from then on. Now, as kafka-reassign-partitions' executeAssignment, it is
refused while any reassignment is in progress unless `--additional` is given, and with
`--additional` the throttles are computed over the moves in progress and the new ones
(calculateProposedMoveMap), so no running move loses its throttle; resubmitting the
plan in progress with `--additional --throttle` changes the rate. `--verify` of a plan
that is complete (and `--cancel` of one) keeps the throttles another plan's moves in
progress still use.

The running move cannot finish during the test, by construction rather than by timing:
the brokers' rates are set to RATE bytes/s and the topic throttles every replica (`*`)
before any move starts, so copying RECORDS * RECORD_BYTES bytes takes at least about
(size - 64 KiB) / RATE seconds (minutes), and the partition that must complete is empty."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafkactl.broker.replication_quota import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
)
from kafkactl.client.admin import BROKER_RESOURCE, AdminClient
from tests import zygote
from tests.cluster.cluster_helpers import Cluster, metadata, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

RATE = 1000  # bytes/s
RECORDS, RECORD_BYTES = 600, 1000
OVERRIDES = {"replica_fetch_backoff_ms": "100", "replica_fetch_max_bytes": "65536",
             "replication_quota_window_num": "2", "replication_quota_window_size_seconds": "1"}
TOPIC = "pair"
CANNOT_EXECUTE = ("Cannot execute because there is an existing partition assignment.  Use "
                  "--additional to override this and create a new partition assignment in "
                  "addition to the existing one. The --additional flag can also be used to "
                  "change the throttle by resubmitting the current reassignment.")


def _kafkactl(*args: str) -> Any:
    return zygote.run(list(args), text=True, timeout=120)


def _rebalance(cluster: Cluster, *args: str) -> Any:
    return _kafkactl("rebalance", "--partitions", "-b", cluster.bootstrap, *args)


def _topic_throttles(cluster: Cluster) -> dict[str, str]:
    with AdminClient(cluster.bootstrap) as admin:
        entries = admin.describe_configs(TOPIC, [LEADER_REPLICAS, FOLLOWER_REPLICAS])
    return {k: e.value or "" for k, e in entries.items() if not e.is_default and e.value}


def _broker_rates(cluster: Cluster, broker_id: int) -> dict[str, str]:
    """The broker's own dynamic rates, asked of that broker."""
    with AdminClient(cluster.brokers[broker_id].bootstrap) as admin:
        entries = admin.describe_configs(str(broker_id), [LEADER_RATE, FOLLOWER_RATE],
                                         resource_type=BROKER_RESOURCE)
    return {k: e.value or "" for k, e in entries.items() if e.source == 2 and e.value}


def _rates_everywhere(cluster: Cluster, rate: int | None) -> None:
    want = {} if rate is None else {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)}
    for b in cluster.brokers:
        wait_until(lambda b=b: _broker_rates(cluster, b) == want, 30,  # type: ignore[misc]
                   f"broker {b}'s rates {want}")


def _in_progress(cluster: Cluster) -> set[str]:
    with AdminClient(cluster.bootstrap) as admin:
        return {f"{t}-{p}" for t, p in admin.list_partition_reassignments()}


def _replicas(cluster: Cluster, partition: int) -> list[int]:
    md = metadata(cluster.live()[0].port, [TOPIC])
    return [list(p["replica_nodes"]) for t in md["topics"] for p in t["partitions"]
            if p["partition_index"] == partition][0]


def _plan(tmp_path: Path, partition: int, replicas: list[int]) -> Path:
    path = tmp_path / f"plan{partition}-{'-'.join(map(str, replicas))}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": partition, "replicas": replicas}]}))
    return path


def _throttled_topic(broker_factory: Any, zookeeper: ZooKeeperServer,
                     tmp_path: Path) -> Cluster:
    """Three brokers, every one throttled at RATE; topic `pair`: partitions 0 and 1 with
    RECORDS records each on broker 1, partition 2 empty on broker 1, every replica
    throttled (so a move of 0 or 1 is throttled from its first byte)."""
    cluster = start_cluster(broker_factory, zookeeper, (1, 2, 3), **OVERRIDES)
    r = _kafkactl("topics", "create", "-b", cluster.bootstrap, "-t", TOPIC,
                  "--replica-assignment", "1,1,1",
                  "--config", f"{LEADER_REPLICAS}=*", "--config", f"{FOLLOWER_REPLICAS}=*")
    assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders(TOPIC, 3)
    with AdminClient(cluster.bootstrap) as admin:
        for b in cluster.brokers:
            admin.alter_configs(str(b), {LEADER_RATE: str(RATE), FOLLOWER_RATE: str(RATE)},
                                resource_type=BROKER_RESOURCE)
    _rates_everywhere(cluster, RATE)
    data = tmp_path / "records.txt"
    data.write_bytes(b"".join(b"%06d" % i + b"x" * (RECORD_BYTES - 6) + b"\n"
                              for i in range(RECORDS)))
    for p in (0, 1):
        r = _kafkactl("produce", "-b", cluster.bootstrap, "-t", TOPIC, "-p", str(p), "-q",
                      "-f", str(data), "--batch-size", "16384")
        assert r.returncode == 0, r.stderr
    return cluster


def test_a_second_plan_needs_additional_and_then_throttles_both(
        broker_factory: Any, zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    cluster = _throttled_topic(broker_factory, zookeeper, tmp_path)
    first, second = _plan(tmp_path, 0, [2]), _plan(tmp_path, 1, [3])
    r = _rebalance(cluster, "--plan-in", str(first), "--execute", "--throttle", str(RATE),
                   "--timeout", "0.5")
    assert r.returncode == 0, r.stderr
    assert "1 of 1 move(s) still in progress" in r.stderr, r.stderr
    assert _topic_throttles(cluster) == {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:2"}
    assert _in_progress(cluster) == {"pair-0"}

    # refused while pair-0 moves: nothing started, the throttles as they were
    refused = _rebalance(cluster, "--plan-in", str(second), "--execute", "--throttle",
                         str(RATE), "--timeout", "0.5")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"error: {CANNOT_EXECUTE} In progress: pair-0" in refused.stderr, refused.stderr
    assert refused.stdout == ""
    assert _in_progress(cluster) == {"pair-0"}
    assert _topic_throttles(cluster) == {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:2"}
    # so is the planner's --execute (the dry run says why --execute would be)
    planned = _rebalance(cluster, "-t", "nosuch")
    assert "note: reassignments are in progress (pair-0): --execute needs --additional" \
        in planned.stderr, planned.stderr
    assert _rebalance(cluster, "--execute", "-t", TOPIC).returncode == 1

    # --additional: started, and the throttles cover both moves
    added = _rebalance(cluster, "--plan-in", str(second), "--execute", "--additional",
                       "--throttle", str(RATE), "--timeout", "0.5")
    assert added.returncode == 0, added.stderr
    assert _in_progress(cluster) == {"pair-0", "pair-1"}
    assert _topic_throttles(cluster) == {LEADER_REPLICAS: "0:1,1:1",
                                         FOLLOWER_REPLICAS: "0:2,1:3"}
    _rates_everywhere(cluster, RATE)

    # resubmitting the plan in progress changes the rate, and keeps every move throttled
    resubmitted = _rebalance(cluster, "--plan-in", str(first), "--execute", "--additional",
                             "--throttle", str(2 * RATE), "--timeout", "0.5", "--json")
    assert resubmitted.returncode == 0, resubmitted.stderr
    doc = json.loads(resubmitted.stdout)
    # (the rollback of a move in progress: the replicas it began from)
    assert doc["rollback"]["partitions"] == [
        {"topic": TOPIC, "partition": 0, "replicas": [1], "log_dirs": ["any"]}], doc
    assert _in_progress(cluster) == {"pair-0", "pair-1"}
    assert _topic_throttles(cluster) == {LEADER_REPLICAS: "0:1,1:1",
                                         FOLLOWER_REPLICAS: "0:2,1:3"}
    _rates_everywhere(cluster, 2 * RATE)

    # --additional goes with --execute
    usage = _rebalance(cluster, "--plan-in", str(first), "--additional")
    assert usage.returncode == 2 and "--additional goes with --execute" in usage.stderr

    cancelled = _rebalance(cluster, "--cancel")
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout == ("Successfully cancelled partition reassignments for: "
                                "pair-0,pair-1\n")
    assert _topic_throttles(cluster) == {}
    _rates_everywhere(cluster, None)


def test_verify_and_cancel_keep_the_throttles_of_moves_still_running(
        broker_factory: Any, zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """A plan complete (or cancelled) while another plan's move runs: `--verify` (and
    `--cancel`) remove no throttle that move still copies under (kafka-reassign-partitions
    clears them all, the brokers' rates too, and the running move goes unthrottled)."""
    cluster = _throttled_topic(broker_factory, zookeeper, tmp_path)
    running = tmp_path / "running.json"
    running.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "replicas": [2]},
        {"topic": TOPIC, "partition": 1, "replicas": [3]}]}))
    r = _rebalance(cluster, "--plan-in", str(running), "--execute", "--throttle", str(RATE),
                   "--timeout", "0.5")
    assert r.returncode == 0, r.stderr
    throttles = {LEADER_REPLICAS: "0:1,1:1", FOLLOWER_REPLICAS: "0:2,1:3"}
    assert _topic_throttles(cluster) == throttles
    assert _in_progress(cluster) == {"pair-0", "pair-1"}
    # another move, started outside this plan (the empty partition: it completes)
    with AdminClient(cluster.bootstrap) as admin:
        assert admin.alter_partition_reassignments({(TOPIC, 2): [3]}) == {(TOPIC, 2): None}
    wait_until(lambda: _in_progress(cluster) == {"pair-0", "pair-1"} and
               _replicas(cluster, 2) == [3], 60, "pair-2 moved")
    done = _plan(tmp_path, 2, [3])
    verify = _rebalance(cluster, "--verify", "--plan-in", str(done))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert verify.stdout.startswith("Status of partition reassignment:\n"
                                    "Reassignment of partition pair-2 is completed.\n")
    assert "Clearing" not in verify.stdout, verify.stdout
    assert ("Keeping the broker-level throttles and the topic-level ones of pair: other "
            "reassignments are still in progress (pair-0, pair-1)") in verify.stdout, \
        verify.stdout
    assert _topic_throttles(cluster) == throttles
    _rates_everywhere(cluster, RATE)
    as_json = json.loads(_rebalance(cluster, "--verify", "--plan-in", str(done),
                                    "--json").stdout)
    assert as_json["throttles_kept_for"] == ["pair-0", "pair-1"], as_json
    assert "throttles_cleared" not in as_json

    # one move cancelled while the other runs: the same
    cancel = _rebalance(cluster, "--cancel", "--plan-in", str(_plan(tmp_path, 1, [3])))
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stdout == "Successfully cancelled partition reassignment for: pair-1\n"
    assert _in_progress(cluster) == {"pair-0"}
    assert _topic_throttles(cluster) == throttles
    _rates_everywhere(cluster, RATE)

    # once nothing runs any more they all go, as before
    assert _rebalance(cluster, "--cancel").returncode == 0
    assert _topic_throttles(cluster) == {}
    _rates_everywhere(cluster, None)
