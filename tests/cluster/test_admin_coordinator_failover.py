"""Admin commands while a coordinator is down (found by a tester): `offsets show` and
`transactions describe` run right after the group's (the transaction's) coordinator broker
is SIGKILLed, with the live brokers as bootstrap, failed at once with "cannot connect to
broker ...": FindCoordinator names the dead broker until its ZooKeeper session expires and
another broker takes the coordinator's partition. They retry now, as Kafka's admin client
does until default.api.timeout.ms, and answer from the new coordinator."""

from __future__ import annotations

from typing import Any

from kafkactl.client.errors import ClientError
from kafkactl.client.group import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.producer import Producer
from kafkactl.client.transaction_admin import TransactionAdmin
from tests import zygote
from tests.cluster.cluster_helpers import start_cluster
from tests.cluster.test_config_changes import create_topic
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

OVERRIDES = {"default_replication_factor": "3", "offsets_topic_replication_factor": "3",
             "offsets_topic_num_partitions": "1", "transaction_state_log_replication_factor":
             "3", "transaction_state_log_num_partitions": "1",
             "transaction_state_log_min_isr": "1", "replica_fetch_backoff_ms": "100"}


def test_offsets_show_and_transactions_describe_wait_out_a_dead_coordinator(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, zookeeper, **OVERRIDES)
    create_topic(cluster, "t", {0: [1, 2, 3]})
    client = KafkaClient(cluster.bootstrap)
    try:
        groups = GroupAdmin(client)
        groups.commit_offsets("g", {("t", 0): 7})
        group_node = groups.find_coordinator("g")[2]
    finally:
        client.close()
    producer = Producer(cluster.bootstrap, transactional_id="tx", linger_ms=0)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", b"open", partition=0)
    producer.flush()  # the transaction stays open: Ongoing

    live = [b for i, b in cluster.brokers.items() if i != group_node]
    cluster.brokers[group_node].kill()
    r = zygote.run(["offsets", "show", "-G", "g", "-b", ",".join(b.bootstrap for b in live)],
                   text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "t" in r.stdout and "7" in r.stdout, r.stdout
    cluster.brokers[group_node].start()

    client = KafkaClient(cluster.bootstrap)
    try:
        # the broker just restarted may still be loading what it leads: ask until found
        def found() -> int | None:
            try:
                return TransactionAdmin(client).coordinator("tx")
            except ClientError:
                return None
        txn_node = wait_until(found, 60, "the coordinator of tx")
    finally:
        client.close()
    live = [b for i, b in cluster.brokers.items() if i != txn_node]
    cluster.brokers[txn_node].kill()
    r = zygote.run(["transactions", "describe", "-t", "tx", "--json", "-b",
                    ",".join(b.bootstrap for b in live)], text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert '"Ongoing"' in r.stdout or "Ongoing" in r.stdout, r.stdout
    producer.close(0)
