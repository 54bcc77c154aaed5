"""One declarative table module per API (``REQUEST`` / ``RESPONSE``), plus the embedded
consumer-protocol and ``__consumer_offsets`` data schemas.

The tables were drafted by ``scripts/gen_protocol_tables.py`` from Kafka's JSON specs and
trimmed to our advertised versions (:mod:`kafkactl.protocol.versions`).
"""

from __future__ import annotations

from types import ModuleType

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.messages import (
    alter_client_quotas,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    api_versions,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_user_scram_credentials,
    elect_leaders,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    stop_replica,
    sync_group,
    update_metadata,
)
from kafkactl.protocol.schema import Message

MODULES: dict[ApiKey, ModuleType] = {
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.METADATA: metadata,
    ApiKey.LEADER_AND_ISR: leader_and_isr,
    ApiKey.STOP_REPLICA: stop_replica,
    ApiKey.UPDATE_METADATA: update_metadata,
    ApiKey.CONTROLLED_SHUTDOWN: controlled_shutdown,
    ApiKey.ALTER_PARTITION: alter_partition,
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.JOIN_GROUP: join_group,
    ApiKey.HEARTBEAT: heartbeat,
    ApiKey.LEAVE_GROUP: leave_group,
    ApiKey.SYNC_GROUP: sync_group,
    ApiKey.DESCRIBE_GROUPS: describe_groups,
    ApiKey.LIST_GROUPS: list_groups,
    ApiKey.API_VERSIONS: api_versions,
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.DELETE_RECORDS: delete_records,
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    ApiKey.DESCRIBE_ACLS: describe_acls,
    ApiKey.CREATE_ACLS: create_acls,
    ApiKey.DELETE_ACLS: delete_acls,
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.ALTER_CONFIGS: alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
    ApiKey.CREATE_PARTITIONS: create_partitions,
    ApiKey.DELETE_GROUPS: delete_groups,
    ApiKey.OFFSET_DELETE: offset_delete,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster,
    ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: alter_client_quotas,
    ApiKey.ELECT_LEADERS: elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments,
    ApiKey.SASL_HANDSHAKE: sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: alter_user_scram_credentials,
}

REQUESTS: dict[int, Message] = {int(k): m.REQUEST for k, m in MODULES.items()}
RESPONSES: dict[int, Message] = {int(k): m.RESPONSE for k, m in MODULES.items()}
