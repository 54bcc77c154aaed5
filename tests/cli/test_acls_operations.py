"""`kafkactl acls add` refuses an operation the resource type has no use for, as
kafka-acls does (Kafka's AclEntry.supportedOperations): such an ACL would be stored and
never grant anything. Checked before any broker is asked (-b points at a closed port: an
accepted combination gets as far as the connection error, exit 1)."""

from __future__ import annotations

import subprocess

import pytest

from tests import zygote

NOWHERE = ("-b", "127.0.0.1:9")


def _add(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(["acls", "add", "--allow-principal", "User:a", *args, *NOWHERE],
                      text=True, timeout=60)


@pytest.mark.parametrize("resource, operation, supported", [
    (("--group", "g"), "Write", "Read, Describe, Delete, All"),
    (("--group", "g"), "Create", "Read, Describe, Delete, All"),
    (("--topic", "t"), "IdempotentWrite",
     "Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs, All"),
    (("--topic", "t"), "ClusterAction",
     "Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs, All"),
    (("--cluster",), "Read",
     "Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, "
     "Describe, All"),
    (("--transactional-id", "x"), "Read", "Describe, Write, All"),
])
def test_an_operation_the_resource_type_lacks_is_refused(resource: tuple[str, ...],
                                                         operation: str,
                                                         supported: str) -> None:
    r = _add(*resource, "--operation", operation)
    assert r.returncode == 2, r.stderr
    kind = {"--group": "Group", "--topic": "Topic", "--cluster": "Cluster",
            "--transactional-id": "TransactionalId"}[resource[0]]
    assert (f"--operation {operation}: ResourceType {kind} only supports operations "
            f"{supported}") in r.stderr, r.stderr


def test_one_wrong_operation_among_several_resources_refuses_all() -> None:
    """Read suits the topic but not the cluster: nothing is added (exit 2 before asking)."""
    r = _add("--topic", "t", "--cluster", "--operation", "Read")
    assert r.returncode == 2 and "ResourceType Cluster only supports" in r.stderr, r.stderr


@pytest.mark.parametrize("resource, operation", [
    (("--group", "g"), "Read"), (("--group", "g"), "Delete"), (("--group", "g"), "All"),
    (("--topic", "t"), "AlterConfigs"), (("--cluster",), "IdempotentWrite"),
    (("--cluster",), "All"), (("--transactional-id", "x"), "Write"),
    (("--transactional-id", "x"), "Describe"),
])
def test_supported_operations_reach_the_broker(resource: tuple[str, ...],
                                               operation: str) -> None:
    r = _add(*resource, "--operation", operation)
    assert r.returncode == 1, r.stderr  # the closed port, not the operation
    assert "only supports operations" not in r.stderr, r.stderr
