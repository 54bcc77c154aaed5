"""What the mirror says when an ACL is missing: a source topic the consumer's principal may
not Describe is "not authorized", not "does not exist" (the broker answers
TOPIC_AUTHORIZATION_FAILED when asked for it by name); a target topic the producer's
principal may not Describe names the topic, the cluster and the ACLs needed (it was a bare
"Authorization failed."); an InitProducerId refusal asks for Write (or IdempotentWrite),
not for enable.idempotence=false, which the mirror refuses. A real broker with Kafka's ACL
authorizer and SASL/PLAIN users, real `kafkactl mirror` processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import zygote
from tests.conftest import BrokerProcess, free_port
from tests.mirror.helpers import FAST, create_topics, produce, run_mirror

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret";')


class AclBroker:
    def __init__(self, tmp: Path) -> None:
        self.plain_port, self.sasl_port = free_port(), free_port()
        data = tmp / "acl-data"
        data.mkdir()
        self.broker = BrokerProcess(data, self.plain_port, {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.plain_port},"
                         f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin;User:ANONYMOUS",
            "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"})
        self.broker.start()
        self.alice = tmp / "alice.properties"
        self.alice.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                              "sasl.username=alice\nsasl.password=alice-secret\n")

    @property
    def admin_bootstrap(self) -> str:  # ANONYMOUS, a super user
        return f"127.0.0.1:{self.plain_port}"

    @property
    def alice_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"


@pytest.fixture
def acl_broker(tmp_path: Path) -> Iterator[AclBroker]:
    b = AclBroker(tmp_path)
    yield b
    b.broker.kill()


def test_unauthorized_source_topic_is_not_called_missing(acl_broker: AclBroker,
                                                        broker_factory: Any) -> None:
    other = broker_factory(**FAST)
    create_topics(acl_broker.admin_bootstrap, {"sec1": 1})
    r = run_mirror("--source", acl_broker.alice_bootstrap, "--consumer.config",
                   str(acl_broker.alice), "--target", other.bootstrap, "-t", "sec1", "-q",
                   timeout=60)
    assert r.returncode == 1, r.stderr
    assert "does not exist" not in r.stderr, r.stderr
    assert "not authorized to describe topic 'sec1' in the source cluster" in r.stderr, \
        r.stderr
    assert "User:alice --operation Describe --operation Read --topic sec1" in r.stderr


def test_unauthorized_target_topic_names_topic_cluster_and_acls(acl_broker: AclBroker,
                                                               broker_factory: Any) -> None:
    source = broker_factory(**FAST)
    create_topics(source.bootstrap, {"secin": 1})
    produce(source.bootstrap, "secin", 0, 1)
    create_topics(acl_broker.admin_bootstrap, {"secin": 1})
    args = ["--source", source.bootstrap, "--target", acl_broker.alice_bootstrap,
            "--producer.config", str(acl_broker.alice), "-t", "secin", "-G", "g", "-q"]
    r = run_mirror(*args, timeout=60)
    assert r.returncode == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last != "error: Authorization failed.", r.stderr
    assert (f"not authorized to describe the target topic 'secin' in the target cluster "
            f"{acl_broker.alice_bootstrap}") in last, r.stderr
    assert "--allow-principal User:alice --operation Describe --operation Write" in last
    # Describe only: the producer is refused an id; the advice is an ACL, not what the
    # mirror refuses (enable.idempotence=false)
    acl = zygote.run(["acls", "add", "-b", acl_broker.admin_bootstrap, "--allow-principal",
                      "User:alice", "--operation", "Describe", "--topic", "secin"],
                     text=True, timeout=60)
    assert acl.returncode == 0, acl.stderr
    r = run_mirror(*args, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "enable.idempotence=false" not in r.stderr, r.stderr
    assert "InitProducerId: CLUSTER_AUTHORIZATION_FAILED" in r.stderr, r.stderr
    assert ("--allow-principal User:alice --operation Write --topic TOPIC (or --operation "
            "IdempotentWrite --cluster)") in r.stderr, r.stderr
