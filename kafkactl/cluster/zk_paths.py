"""Every znode path kafkactl reads or writes, in one place (seed 002's layout, which is also
Kafka's ZooKeeper mode). Paths are relative to the chroot of `zookeeper.connect`.

    /cluster/id                                    {"version":"1","id":...}
    /controller                                    {"version":1,"brokerid":id,...} (ephemeral)
    /controller_epoch                              "N", bumped by each new controller
    /brokers/ids/[id]                              broker registration (ephemeral)
    /brokers/topics/[topic]                        {"version":2,"partitions":{"0":[ids]}}
    /brokers/topics/[topic]/partitions/[n]/state   leader, leader_epoch, isr, ...
    /config/topics/[topic]                         {"version":1,"config":{...}}
    /admin/delete_topics/[topic]
    /latest_producer_id_block                      the last block of producer ids handed out
    /consumers/[group]/ids/[consumer_id]           registration (ephemeral)
    /consumers/[group]/owners/[topic]/[partition]  owning consumer thread id (ephemeral)
    /consumers/[group]/offsets/[topic]/[partition] next offset to consume (persistent)
"""

from __future__ import annotations

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"
CONSUMERS = "/consumers"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}"


def topic_partitions(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions"


def partition_state(name: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{partition}/state"


def topic_config(name: str) -> str:
    return f"{CONFIG_TOPICS}/{name}"


def topic_delete_marker(name: str) -> str:
    return f"{DELETE_TOPICS}/{name}"


def consumer_ids(group: str) -> str:
    return f"{CONSUMERS}/{group}/ids"


def consumer_id(group: str, consumer: str) -> str:
    return f"{CONSUMERS}/{group}/ids/{consumer}"


def owners(group: str, topic_name: str | None = None) -> str:
    base = f"{CONSUMERS}/{group}/owners"
    return base if topic_name is None else f"{base}/{topic_name}"


def owner(group: str, topic_name: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/owners/{topic_name}/{partition}"


def offsets(group: str, topic_name: str | None = None) -> str:
    base = f"{CONSUMERS}/{group}/offsets"
    return base if topic_name is None else f"{base}/{topic_name}"


def offset(group: str, topic_name: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/offsets/{topic_name}/{partition}"
