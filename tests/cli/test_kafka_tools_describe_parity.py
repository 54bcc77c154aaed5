"""`kafkactl topics describe` and `kafkactl offsets list|show` as Kafka's tools print them:

- kafka-topics --describe's `Configs:` lists every entry not at its default
  (ConfigEntry.isDefault), so a broker's own setting (min.insync.replicas=2 in its
  server.properties: STATIC_BROKER_CONFIG) shows besides the topic's overrides; and the
  topic line has `TopicId:` (Kafka's Uuid.toString: URL-safe base64 without padding)
  between `Topic:` and `PartitionCount:`; the JSON document says both alike;
- kafka-consumer-groups --list --state takes an optional value: without one every group is
  listed with its state;
- kafka-consumer-groups --describe (the offsets view) notes on stderr that a group has no
  active members, or that it is rebalancing, as --state and --members already did.
"""

from __future__ import annotations

import base64
import json
import struct
import subprocess
from typing import Any

from tests import zygote
from tests.polling import wait_until


def kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=60)


def _topic_line(out: str, topic: str) -> dict[str, str]:
    [line] = [ln for ln in out.splitlines() if ln.startswith(f"Topic: {topic}\t")]
    return dict(field.split(": ", 1) for field in line.split("\t"))


def _create_described(bootstrap: str) -> None:
    r = kafkactl("topics", "create", "-b", bootstrap, "-t", "described", "--partitions",
                 "2", "--config", "retention.ms=86400000")
    assert r.returncode == 0, r.stderr


def test_describe_configs_not_at_their_default(broker_factory: Any) -> None:
    b = broker_factory(min_insync_replicas="2")  # the broker's own setting
    _create_described(b.bootstrap)
    r = kafkactl("topics", "describe", "-b", b.bootstrap, "-t", "described")
    assert r.returncode == 0, r.stderr
    line = r.stdout.splitlines()[0]
    configs = dict(kv.split("=", 1) for kv in _topic_line(r.stdout, "described")["Configs"]
                   .split(","))
    # the topic's override, and the broker's own setting (STATIC_BROKER_CONFIG)
    assert configs["retention.ms"] == "86400000", line
    assert configs.get("min.insync.replicas") == "2", line
    assert "cleanup.policy" not in configs, line  # at its default: not listed
    r = kafkactl("topics", "describe", "-b", b.bootstrap, "-t", "described", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["configs"] == configs


def test_describe_topic_id(broker_factory: Any) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    b = broker_factory()
    _create_described(b.bootstrap)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    [future] = admin.describe_topics(TopicCollection(["described"])).values()
    uid = future.result(timeout=30).topic_id
    # Kafka's Uuid.toString: the 16 bytes in URL-safe base64 without padding (librdkafka's
    # str() uses the standard alphabet, '+' and '/', so it is not the reference)
    raw = struct.pack(">qq", uid.get_most_significant_bits(), uid.get_least_significant_bits())
    topic_id = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert len(topic_id) == 22, topic_id

    r = kafkactl("topics", "describe", "-b", b.bootstrap, "-t", "described")
    assert r.returncode == 0, r.stderr
    line = r.stdout.splitlines()[0]
    # Kafka's order: Topic, TopicId, PartitionCount, ReplicationFactor, Configs
    assert [f.split(": ", 1)[0] for f in line.split("\t")] == [
        "Topic", "TopicId", "PartitionCount", "ReplicationFactor", "Configs"], line
    assert _topic_line(r.stdout, "described")["TopicId"] == topic_id, line
    r = kafkactl("topics", "describe", "-b", b.bootstrap, "-t", "described", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["topic_id"] == topic_id


def _group_states(out: str) -> list[list[str]]:
    return [ln.split() for ln in out.splitlines()]


def test_list_state_without_a_value(broker_factory: Any) -> None:
    b = broker_factory(group_initial_rebalance_delay_ms="0")
    r = kafkactl("topics", "create", "-b", b.bootstrap, "-t", "listed", "--partitions", "1")
    assert r.returncode == 0, r.stderr
    for g in ("idle1", "idle2"):
        r = kafkactl("offsets", "reset", "-G", g, "--topic", "listed", "--to-earliest",
                     "--execute", "-b", b.bootstrap)
        assert r.returncode == 0, r.stderr
    want = [["GROUP", "STATE"], ["idle1", "Empty"], ["idle2", "Empty"]]
    # kafka-consumer-groups --list --state: every group, with its state
    r = kafkactl("offsets", "list", "-b", b.bootstrap, "--state")
    assert r.returncode == 0, r.stderr
    assert _group_states(r.stdout) == want, r.stdout
    # followed by another option: still no value
    r = kafkactl("offsets", "list", "--state", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    assert _group_states(r.stdout) == want, r.stdout
    r = kafkactl("offsets", "list", "--state", "--json", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    assert [(g["group"], g["state"]) for g in json.loads(r.stdout)] == [
        ("idle1", "Empty"), ("idle2", "Empty")]
    # with a value: only those groups; and without --state the names only
    r = kafkactl("offsets", "list", "--state", "stable", "-b", b.bootstrap)
    assert r.returncode == 0 and r.stdout == "", r.stdout
    r = kafkactl("offsets", "list", "--state=empty", "-b", b.bootstrap)
    assert _group_states(r.stdout) == want, r.stdout
    r = kafkactl("offsets", "list", "-b", b.bootstrap)
    assert r.stdout.splitlines() == ["idle1", "idle2"], r.stdout


def _state(bootstrap: str, group: str) -> str | None:
    r = kafkactl("offsets", "show", "-G", group, "--state", "--json", "-b", bootstrap)
    return str(json.loads(r.stdout)[0]["state"]) if r.returncode == 0 else None


def test_offsets_view_notes_an_empty_and_a_rebalancing_group(broker_factory: Any) -> None:
    from confluent_kafka import Consumer

    # the first member's join waits out the initial rebalance delay (bounded by its
    # rebalance timeout, max.poll.interval.ms): the group is PreparingRebalance meanwhile
    b = broker_factory(group_initial_rebalance_delay_ms="300000")
    r = kafkactl("topics", "create", "-b", b.bootstrap, "-t", "noted", "--partitions", "2")
    assert r.returncode == 0, r.stderr
    r = kafkactl("offsets", "reset", "-G", "greb", "--topic", "noted", "--to-earliest",
                 "--execute", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr

    r = kafkactl("offsets", "show", "-G", "greb", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    assert "Consumer group 'greb' has no active members." in r.stderr, r.stderr
    assert "GROUP" in r.stdout and "noted" in r.stdout  # the table still follows

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "greb",
                  "max.poll.interval.ms": 300000, "session.timeout.ms": 45000})
    try:
        c.subscribe(["noted"])
        wait_until(lambda: (c.poll(0.1), _state(b.bootstrap, "greb"))[1] in (
            "PreparingRebalance", "CompletingRebalance"), 60, "the group rebalancing")
        r = kafkactl("offsets", "show", "-G", "greb", "-b", b.bootstrap)
        assert r.returncode == 0, r.stderr
        assert "Warning: Consumer group 'greb' is rebalancing." in r.stderr, r.stderr
        assert "no active members" not in r.stderr
        # once: the --json view says it alike on stderr, its stdout stays one document
        r = kafkactl("offsets", "show", "-G", "greb", "--json", "-b", b.bootstrap)
        assert r.returncode == 0 and json.loads(r.stdout)
        assert "Warning: Consumer group 'greb' is rebalancing." in r.stderr, r.stderr
    finally:
        c.close()
