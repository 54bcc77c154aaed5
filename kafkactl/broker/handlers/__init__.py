"""One module per API family, and HANDLERS: the one table of API key -> handler.

A handler is `fn(services, ctx, request) -> response | None | awaitable` (see
kafkactl.broker.request_handler). The table's keys must be exactly those of
protocol.versions.SUPPORTED_VERSIONS: KafkaApis refuses any other table, and ApiVersions
advertises that table (tests/broker/test_api_table.py checks both on a running broker).
"""

from __future__ import annotations

from kafkactl.broker.handlers import (
    acls,
    api_versions,
    client_quotas,
    cluster,
    configs,
    controller_requests,
    fetch,
    groups,
    leader_epoch,
    list_offsets,
    log_dirs,
    metadata,
    offsets,
    produce,
    producer_id,
    reassignments,
    records,
    sasl,
    scram_credentials,
    topics,
    transactions,
    txn_offsets,
)
from kafkactl.broker.request_handler import Handler
from kafkactl.protocol.api_keys import ApiKey

HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.PRODUCE: produce.handle_produce,
    ApiKey.FETCH: fetch.handle_fetch,
    ApiKey.LIST_OFFSETS: list_offsets.handle_list_offsets,
    ApiKey.METADATA: metadata.handle_metadata,
    ApiKey.LEADER_AND_ISR: controller_requests.handle_leader_and_isr,
    ApiKey.STOP_REPLICA: controller_requests.handle_stop_replica,
    ApiKey.UPDATE_METADATA: controller_requests.handle_update_metadata,
    ApiKey.CONTROLLED_SHUTDOWN: controller_requests.handle_controlled_shutdown,
    ApiKey.ALTER_PARTITION: controller_requests.handle_alter_partition,
    ApiKey.ELECT_LEADERS: reassignments.handle_elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: reassignments.handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: reassignments.handle_list_partition_reassignments,
    ApiKey.OFFSET_COMMIT: offsets.handle_offset_commit,
    ApiKey.OFFSET_FETCH: offsets.handle_offset_fetch,
    ApiKey.FIND_COORDINATOR: groups.handle_find_coordinator,
    ApiKey.JOIN_GROUP: groups.handle_join_group,
    ApiKey.HEARTBEAT: groups.handle_heartbeat,
    ApiKey.LEAVE_GROUP: groups.handle_leave_group,
    ApiKey.SYNC_GROUP: groups.handle_sync_group,
    ApiKey.DESCRIBE_GROUPS: groups.handle_describe_groups,
    ApiKey.LIST_GROUPS: groups.handle_list_groups,
    ApiKey.API_VERSIONS: api_versions.handle_api_versions,
    ApiKey.CREATE_TOPICS: topics.handle_create_topics,
    ApiKey.DELETE_TOPICS: topics.handle_delete_topics,
    ApiKey.DELETE_RECORDS: records.handle_delete_records,
    ApiKey.INIT_PRODUCER_ID: producer_id.handle_init_producer_id,
    ApiKey.TXN_OFFSET_COMMIT: txn_offsets.handle_txn_offset_commit,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: leader_epoch.handle_offset_for_leader_epoch,
    ApiKey.DESCRIBE_ACLS: acls.handle_describe_acls,
    ApiKey.CREATE_ACLS: acls.handle_create_acls,
    ApiKey.DELETE_ACLS: acls.handle_delete_acls,
    ApiKey.DESCRIBE_CONFIGS: configs.handle_describe_configs,
    ApiKey.ALTER_CONFIGS: configs.handle_alter_configs,
    ApiKey.CREATE_PARTITIONS: topics.handle_create_partitions,
    ApiKey.DELETE_GROUPS: groups.handle_delete_groups,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs,
    ApiKey.OFFSET_DELETE: offsets.handle_offset_delete,
    ApiKey.DESCRIBE_CLUSTER: cluster.handle_describe_cluster,
    ApiKey.DESCRIBE_LOG_DIRS: log_dirs.handle_describe_log_dirs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: log_dirs.handle_alter_replica_log_dirs,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: client_quotas.handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: client_quotas.handle_alter_client_quotas,
    ApiKey.SASL_HANDSHAKE: sasl.handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: sasl.handle_sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS:
        scram_credentials.handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram_credentials.handle_alter_user_scram_credentials,
    ApiKey.ADD_PARTITIONS_TO_TXN: transactions.handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: transactions.handle_add_offsets_to_txn,
    ApiKey.END_TXN: transactions.handle_end_txn,
    ApiKey.WRITE_TXN_MARKERS: transactions.handle_write_txn_markers,
    ApiKey.DESCRIBE_PRODUCERS: transactions.handle_describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: transactions.handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: transactions.handle_list_transactions,
}
