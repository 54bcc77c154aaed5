"""A consumer group member's host as DescribeGroups gives it: "/" and the client's address
in Java's form, as Kafka's coordinator (for an IPv6 client the address uncompressed; it
was the address with the port, "/::1:57194"). A real broker with an IPv4 and an IPv6
listener, real confluent-kafka consumers."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until
from tests.sockets import ipv6_loopback


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback here")
def test_member_hosts_are_written_as_kafka_writes_them(tmp_path: Path) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    port, v6 = free_port(), free_port()
    broker = BrokerProcess(tmp_path / "data", port, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},V6://[::1]:{v6}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,V6:PLAINTEXT",
        "offsets.topic.num.partitions": "1"})
    (tmp_path / "data").mkdir()
    broker.start()
    consumers: list[Any] = []
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic("t", 2, 1)]).values():
            f.result(30)
        hosts = {}
        for where, group in ((broker.bootstrap, "g4"), (f"[::1]:{v6}", "g6")):
            group += uuid.uuid4().hex[:6]
            c = Consumer({"bootstrap.servers": where, "group.id": group})
            c.subscribe(["t"])
            consumers.append(c)

            def described(c: Any = c, group: str = group) -> str | None:
                c.poll(0.1)
                d = admin.describe_consumer_groups([group])[group].result(10)
                return d.members[0].host if d.members else None

            hosts[where] = wait_until(described, 60, f"a member of {group}")
        assert hosts == {broker.bootstrap: "/127.0.0.1", f"[::1]:{v6}": "/0:0:0:0:0:0:0:1"}
    finally:
        for c in consumers:
            c.close()
        broker.kill()
