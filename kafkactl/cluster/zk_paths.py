"""Every znode path kafkactl reads or writes, in one place (seed 002's layout, which is also
Kafka's ZooKeeper mode). Paths are relative to the chroot of `zookeeper.connect`.

    /cluster/id                                    {"version":"1","id":...}
    /controller                                    {"version":1,"brokerid":id,...} (ephemeral)
    /controller_epoch                              "N", bumped by each new controller
    /brokers/ids/[id]                              broker registration (ephemeral)
    /brokers/topics/[topic]                        {"version":2,"partitions":{"0":[ids]}}
    /brokers/topics/[topic]/partitions/[n]/state   leader, leader_epoch, isr, ...
    /config/topics/[topic]                         {"version":1,"config":{...}}
    /config/brokers/[id] or /config/brokers/<default>  dynamic broker configs (KIP-226)
    /admin/delete_topics/[topic]
    /latest_producer_id_block                      the last block of producer ids handed out
    /consumers/[group]/ids/[consumer_id]           registration (ephemeral)
    /consumers/[group]/owners/[topic]/[partition]  owning consumer thread id (ephemeral)
    /consumers/[group]/offsets/[topic]/[partition] next offset to consume (persistent)
    /kafka-acl/[ResourceType]/[name]               LITERAL ACLs {"version":1,"acls":[...]}
    /kafka-acl-extended/prefixed/[ResourceType]/[name]  PREFIXED ACLs
    /kafka-acl-changes/acl_changes_[seq]           a LITERAL resource's ACLs changed
    /kafka-acl-extended-changes/acl_changes_[seq]  a PREFIXED resource's ACLs changed
    /config/users/[user]                           {"version":1,"config":{"SCRAM-SHA-256":..}}
    /config/changes/config_change_[seq]            {"version":2,"entity_path":"users/[user]"}
                                                   (also "topics/[topic]", "brokers/[id]",
                                                   "brokers/<default>")
    /log_dir_event_notification/log_dir_event_[seq]  {"version":1,"broker":id,"event":1}
                                                   (a broker took a log dir offline)
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
ACL = "/kafka-acl"
ACL_EXTENDED = "/kafka-acl-extended"
ACL_PREFIXED = "/kafka-acl-extended/prefixed"
ACL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
CONFIG_USERS = "/config/users"
CONFIG_BROKERS = "/config/brokers"
DEFAULT_BROKER_ENTITY = "<default>"  # /config/brokers/<default>: the cluster-wide layer
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
LOG_DIR_EVENTS = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"


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


def znode_name_problem(name: str) -> str | None:
    """Why `name` cannot be one znode's name (ZooKeeper's PathUtils.validatePath: a '/'
    makes nested znodes, '.' and '..' are relative paths, and NUL, control characters,
    surrogates, the private use area and U+FFF0..U+FFFF are refused); None if it can."""
    if not name:
        return "it is empty"
    if "/" in name:
        return "it contains '/'"
    if name in (".", ".."):
        return f"{name!r} is a relative path"
    for c in name:
        code = ord(c)
        if code <= 0x1F or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xF8FF \
                or code >= 0xFFF0:
            return f"it contains the character U+{code:04X}, which ZooKeeper refuses"
    return None


def acl_resource(resource_type: str, pattern_type: str, name: str) -> str:
    """A resource's ACL znode: `resource_type` in Kafka's names (Topic, Group, Cluster,
    TransactionalId), `pattern_type` LITERAL or PREFIXED. ValueError for a name that is
    not one znode's name (it would name another znode: `a/b`, `/`, `..`)."""
    problem = znode_name_problem(name)
    if problem is not None:
        raise ValueError(f"the ACL resource name {name!r} cannot be a znode: {problem}")
    root = ACL if pattern_type == "LITERAL" else f"{ACL_EXTENDED}/{pattern_type.lower()}"
    return f"{root}/{resource_type}/{name}"


def user_config(sanitized_user: str) -> str:
    return f"{CONFIG_USERS}/{sanitized_user}"


def entity_configs(entity_type: str) -> str:
    return f"/config/{entity_type}"


def entity_config(entity_type: str, name: str) -> str:
    """/config/[entity_type]/[name]: `topics`, `brokers`, `users` (Kafka's ConfigType)."""
    return f"/config/{entity_type}/{name}"


def broker_config(entity: str) -> str:
    """/config/brokers/[id], or /config/brokers/<default> for the cluster-wide layer."""
    return f"{CONFIG_BROKERS}/{entity}"


def config_change(child: str) -> str:
    return f"{CONFIG_CHANGES}/{child}"
