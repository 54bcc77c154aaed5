"""`kafkactl topics` as kafka-topics: `create --replica-assignment 1:2,2:3,3:1` (partitions
separated by commas, replicas by colons; not with --partitions / --replication-factor;
Kafka's sentences for what it refuses itself, the broker's refusal for brokers that are not
live), and `describe`'s ReplicationFactor, the first partition's replica count (it was the
largest count over the partitions)."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import pytest

from kafkactl.cli.topics import parse_replica_assignment, replication_factor
from tests import zygote
from tests.conftest import BrokerProcess


def kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=60)


def test_replication_factor_is_the_first_partitions() -> None:
    def part(p: int, replicas: list[int]) -> SimpleNamespace:
        return SimpleNamespace(partition=p, replicas=replicas)

    # a partition mid-reassignment or grown by hand: kafka-topics still prints partition 0's
    assert replication_factor([part(1, [1, 2, 3]), part(0, [1, 2]), part(2, [3])]) == 2
    assert replication_factor([part(0, [4]), part(1, [1, 2, 3])]) == 1
    assert replication_factor([]) == 0


def test_parse_replica_assignment_as_kafka_topics() -> None:
    assert parse_replica_assignment("1:2,2:3,3:1") == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    assert parse_replica_assignment(" 1 : 2 ,2:3,") == {0: [1, 2], 1: [2, 3]}  # Java's split
    for text, why in [
        ("1:2:1,2:3:4", "Partition replica lists may not contain duplicate entries: 1"),
        ("1:2,3", "Partition 1 has different replication factor: 3"),
        ("1,a", "'a' is not a broker id"),
        ("1,,2", "'' is not a broker id"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_replica_assignment(text)


def test_create_with_a_replica_assignment(module_broker: BrokerProcess) -> None:
    b = module_broker.bootstrap
    r = kafkactl("topics", "create", "-b", b, "-t", "assigned", "--replica-assignment", "0,0,0")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Created topic assigned.\n"
    r = kafkactl("topics", "describe", "-b", b, "-t", "assigned", "--json")
    doc = json.loads(r.stdout)[0]
    assert doc["partition_count"] == 3 and doc["replication_factor"] == 1
    assert [p["replicas"] for p in doc["partitions"]] == [[0], [0], [0]]
    for args, code, why in [
        (["--replica-assignment", "0", "--partitions", "2"], 2,
         'error: Option "[replica-assignment]" can\'t be used with option "[partitions]"'),
        (["--replica-assignment", "0", "--replication-factor", "1"], 2,
         'error: Option "[replica-assignment]" can\'t be used with option '
         '"[replication-factor]"'),
        (["--replica-assignment", "0:0"], 2,
         "error: Partition replica lists may not contain duplicate entries: 0"),
        (["--replica-assignment", "0,0:1"], 2,
         "error: Partition 1 has different replication factor: 0:1"),
        (["--replica-assignment", "0:x"], 2, "error: bad --replica-assignment '0:x'"),
        # the broker's refusal: broker 1 is not live
        (["--replica-assignment", "0,1"], 1,
         "error: topic refused: INVALID_REPLICA_ASSIGNMENT: "),
    ]:
        r = kafkactl("topics", "create", "-b", b, "-t", "refused", *args)
        assert r.returncode == code, (args, r.stderr)
        assert r.stderr.startswith(why), (args, r.stderr)
    assert "refused" not in kafkactl("topics", "list", "-b", b).stdout.split()
