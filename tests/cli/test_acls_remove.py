"""`kafkactl acls remove` with kafka-acls --remove's semantics (issue 30 item 9): the
--allow-host / --deny-host of the ACLs to remove, host * and operation All by default
for a named principal, exactly the ACLs `acls add` makes from the same flags."""

from __future__ import annotations

import subprocess
from typing import Any

from tests import zygote

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}


def acls(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(["acls", *args], text=True, timeout=60)


def listed(b: list[str]) -> set[tuple[str, str, str, str]]:
    """(principal, host, operation, permission) of every ACL on topic t."""
    r = acls("list", "--topic", "t", *b)
    assert r.returncode == 0, r.stderr
    out = set()
    for line in r.stdout.splitlines():
        fields = dict(kv.split("=", 1) for kv in line.split("\t", 1)[1].split(", "))
        out.add((fields["principal"], fields["host"], fields["operation"],
                 fields["permissionType"]))
    return out


def test_remove_matches_kafka_acls(broker_factory: Any) -> None:
    broker = broker_factory(**AUTHORIZER)
    b = ["-b", broker.bootstrap]
    r = acls("add", "--allow-principal", "User:bob", "--allow-host", "10.0.0.1",
             "--allow-host", "10.0.0.2", "--operation", "Read", "--operation", "Write",
             "--topic", "t", *b)
    assert r.returncode == 0 and "Added 4 ACL(s)" in r.stdout, r.stdout + r.stderr
    assert acls("add", "--allow-principal", "User:bob", "--operation", "Read", "--topic",
                "t", *b).returncode == 0
    assert acls("add", "--allow-principal", "User:bob", "--topic", "t", *b).returncode == 0
    assert acls("add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.9",
                "--operation", "Write", "--topic", "t", *b).returncode == 0
    assert len(listed(b)) == 7

    # one host, one operation: exactly that ACL
    r = acls("remove", "--allow-principal", "User:bob", "--allow-host", "10.0.0.1",
             "--operation", "Read", "--topic", "t", *b)
    assert r.returncode == 0 and "Removed 1 ACL(s)" in r.stdout, r.stdout + r.stderr
    assert "host=10.0.0.1, operation=Read, permissionType=Allow" in r.stdout
    assert ("User:bob", "10.0.0.1", "Read", "Allow") not in listed(b)
    assert ("User:bob", "10.0.0.1", "Write", "Allow") in listed(b)
    # no --allow-host: host * only (bob's 10.0.0.x ACLs stay), as kafka-acls
    r = acls("remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "t",
             *b)
    assert "Removed 1 ACL(s)" in r.stdout and "host=*, operation=Read" in r.stdout
    assert ("User:bob", "10.0.0.2", "Read", "Allow") in listed(b)
    # no --operation: the All ACL only, as kafka-acls (its --operation defaults to All)
    r = acls("remove", "--allow-principal", "User:bob", "--topic", "t", *b)
    assert "Removed 1 ACL(s)" in r.stdout and "operation=All" in r.stdout, r.stdout
    # several hosts at once
    r = acls("remove", "--allow-principal", "User:bob", "--allow-host", "10.0.0.1",
             "--allow-host", "10.0.0.2", "--operation", "Write", "--topic", "t", *b)
    assert "Removed 2 ACL(s)" in r.stdout, r.stdout
    # a deny on another host than the ACL's removes nothing; on its host, the ACL
    r = acls("remove", "--deny-principal", "User:eve", "--deny-host", "10.0.0.8",
             "--operation", "Write", "--topic", "t", *b)
    assert "Removed 0 ACL(s)" in r.stdout
    r = acls("remove", "--deny-principal", "User:eve", "--deny-host", "10.0.0.9",
             "--operation", "Write", "--topic", "t", *b)
    assert "Removed 1 ACL(s)" in r.stdout and "permissionType=Deny" in r.stdout
    assert listed(b) == {("User:bob", "10.0.0.2", "Read", "Allow")}

    # a host without its principal names no ACL: refused, nothing removed
    r = acls("remove", "--allow-host", "10.0.0.2", "--topic", "t", *b)
    assert r.returncode == 2 and "--allow-host needs --allow-principal" in r.stderr
    assert acls("add", "--deny-host", "1.2.3.4", "--allow-principal", "User:x", "--topic",
                "t", *b).returncode == 2
    assert len(listed(b)) == 1
    # no principal at all: every ACL of the resource
    r = acls("remove", "--topic", "t", *b)
    assert "Removed 1 ACL(s)" in r.stdout and listed(b) == set()
