"""The ApiVersions table we advertise (and therefore the versions our codec must speak).

Why these ranges (``../shared/reference/notes-protocol-and-clients.md``):

* every minimum is 0: librdkafka 2.0.2 turns features on only when old versions are in the
  range (FindCoordinator 0 for groups and lz4, Produce 3 + Fetch 4 for magic 2, Produce 7 +
  Fetch 10 for zstd, ListOffsets 1 for offsets-by-time, InitProducerId 0);
* Fetch stops at 12: v13+ addresses topics by topic id;
* nothing we do not implement is advertised (librdkafka starts telemetry on key 71), and no
  range has max < min (aiokafka drops the connection);
* SaslHandshake 0-1 and SaslAuthenticate 0-2 (KIP-152, KIP-368) are advertised on every
  listener, as Kafka does: on one without SASL they answer ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from kafkactl.protocol.api_keys import ApiKey

SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 9),
    ApiKey.FETCH: (0, 12),
    ApiKey.LIST_OFFSETS: (0, 7),
    ApiKey.METADATA: (0, 12),
    ApiKey.LEADER_AND_ISR: (4, 6),
    ApiKey.STOP_REPLICA: (3, 3),
    ApiKey.UPDATE_METADATA: (7, 7),
    ApiKey.CONTROLLED_SHUTDOWN: (3, 3),
    ApiKey.ALTER_PARTITION: (1, 1),
    ApiKey.OFFSET_COMMIT: (0, 8),
    ApiKey.OFFSET_FETCH: (0, 8),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 4),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
}

# Sent only by a kafkactl controller to the brokers of its cluster (ZooKeeper mode), at the
# newest version it speaks; no client sends them, so their ranges need not start at v0.
INTER_BROKER_APIS: frozenset[ApiKey] = frozenset({
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION, ApiKey.WRITE_TXN_MARKERS,
})

API_VERSIONS_MAX = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]


def is_supported(api_key: int, version: int) -> bool:
    """True when (api_key, version) is inside the advertised table."""
    try:
        lo, hi = SUPPORTED_VERSIONS[ApiKey(api_key)]
    except (ValueError, KeyError):
        return False
    return lo <= version <= hi


def api_versions_entries() -> list[dict[str, int]]:
    """The ``api_keys`` array of an ApiVersions response, sorted by key."""
    return [
        {"api_key": int(k), "min_version": lo, "max_version": hi}
        for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
    ]
