"""`offsets show|reset|delete` at their edges, as kafka-consumer-groups behaves: a group
that does not exist, --group with --all, an empty partition list, an offset outside the
log, a committed offset past the log end (negative lag), and a dry run of deleting the
offsets of a topic the group subscribes to."""

from __future__ import annotations

import json
from typing import Any

from tests.groups.helpers import create_topic, kafkactl, produce, wait_until

MODULE_BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


def _run(b: Any, *args: str) -> Any:
    return kafkactl("offsets", *args, "-b", b.bootstrap)


def _commit(b: Any, group: str, offsets: dict[tuple[str, int], int]) -> None:
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient

    client = KafkaClient(b.bootstrap)
    admin = GroupAdmin(client)
    try:
        assert not any(admin.commit_offsets(group, offsets).values())
    finally:
        admin.close()
        client.close()


def _topic(b: Any, name: str) -> None:
    """`name`: 2 partitions, 20 records (spread by key)."""
    create_topic(b.bootstrap, name, 2)
    produce(b.bootstrap, name, [f"r{i}" for i in range(20)])


def _end(b: Any, topic: str, partition: int) -> int:
    from kafkactl.client.consumer import SimpleConsumer
    from kafkactl.client.fetcher import LATEST

    simple = SimpleConsumer(b.bootstrap)
    try:
        return simple.list_offsets({(topic, partition): LATEST})[(topic, partition)][0]
    finally:
        simple.close()


def test_empty_partition_list_is_a_parse_error(module_broker: Any) -> None:
    b = module_broker
    _topic(b, "e3")
    _commit(b, "gParse", {("e3", 0): 1})
    for spec in ("e3:", "e3:x", "e3:,"):
        r = _run(b, "reset", "-G", "gParse", "--topic", spec, "--to-earliest")
        assert r.returncode == 2, (spec, r.stderr)
        assert "bad partitions in --topic" in r.stderr


def test_show_refuses_group_with_all_and_names_a_missing_group(module_broker: Any) -> None:
    b = module_broker
    _topic(b, "e4")
    _commit(b, "gShow", {("e4", 0): 1})
    r = _run(b, "show", "-G", "gShow", "--all")
    assert r.returncode == 2 and "not both" in r.stderr, r.stderr
    r = _run(b, "show", "-G", "nosuchgroup")
    assert r.returncode == 1
    assert "Consumer group 'nosuchgroup' does not exist." in r.stderr
    assert "No committed offsets" not in r.stderr
    # the groups that exist are still shown
    r = _run(b, "show", "-G", "nosuchgroup", "-G", "gShow")
    assert r.returncode == 1 and "'nosuchgroup' does not exist" in r.stderr
    assert "gShow" in r.stdout


def test_offset_outside_the_log_is_clamped_with_a_warning(module_broker: Any) -> None:
    b = module_broker
    _topic(b, "e5")
    _commit(b, "gClamp", {("e5", 0): 1})
    r = _run(b, "reset", "-G", "gClamp", "--topic", "e5:0", "--to-offset", "-5", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["offsets"][0]["new_offset"] == 0
    assert "New offset (-5) is lower than earliest offset for topic partition e5-0. " \
        "Value will be set to 0" in r.stderr
    end = _end(b, "e5", 0)
    r = _run(b, "reset", "-G", "gClamp", "--topic", "e5:0", "--to-offset", "100000")
    assert r.returncode == 0, r.stderr
    assert "New offset (100000) is higher than latest offset for topic partition e5-0. " \
        f"Value will be set to {end}" in r.stderr


def test_committed_offset_past_the_log_end_shows_a_negative_lag(module_broker: Any) -> None:
    b = module_broker
    _topic(b, "e6")
    end = _end(b, "e6", 1)
    _commit(b, "gLag", {("e6", 1): end + 500})
    r = _run(b, "show", "-G", "gLag", "--json")
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["log_end_offset"] == end and row["lag"] == -500
    r = _run(b, "show", "-G", "gLag")
    assert r.returncode == 0 and "-500" in r.stdout, r.stdout


def test_delete_dry_run_says_a_subscribed_topic_would_be_refused(module_broker: Any) -> None:
    from confluent_kafka import Consumer, TopicPartition

    b = module_broker
    _topic(b, "e7")
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "gActive",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["e7"])
        wait_until(lambda: c.poll(0.2) is not None or bool(c.assignment()), 30,
                   "the consumer's assignment")
        c.commit(offsets=[TopicPartition("e7", 0, 3)], asynchronous=False)
        wait_until(lambda: "gActive" in _run(b, "list", "--state", "Stable").stdout, 30,
                   "group gActive Stable")
        dry = _run(b, "delete", "-G", "gActive", "--topic", "e7")
        execute = _run(b, "delete", "-G", "gActive", "--topic", "e7", "--execute")
    finally:
        c.close()
    assert execute.returncode == 1 and "GROUP_SUBSCRIBED_TO_TOPIC" in execute.stderr
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert "e7-0: GROUP_SUBSCRIBED_TO_TOPIC" in dry.stderr
    assert "Would delete" not in dry.stdout
