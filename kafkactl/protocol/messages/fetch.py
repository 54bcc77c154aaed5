"""Fetch (API key 1, versions 0-12):
read record batches from partitions.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('FetchRequest', 1, '0-12', '12+', (
    F('cluster_id', 'string', '12+', nullable='12+', tag=0, tagged='12+', default=None),
    F('replica_id', 'int32', '0-14', default=-1),
    F('max_wait_ms', 'int32', '0+'),
    F('min_bytes', 'int32', '0+'),
    F('max_bytes', 'int32', '3+', default=2147483647),
    F('isolation_level', 'int8', '4+', default=0),
    F('session_id', 'int32', '7+', default=0),
    F('session_epoch', 'int32', '7+', default=-1),
    F('topics', '[]FetchTopic', '0+', fields=(
        F('topic', 'string', '0-12'),
        F('partitions', '[]FetchPartition', '0+', fields=(
            F('partition', 'int32', '0+'),
            F('current_leader_epoch', 'int32', '9+', default=-1),
            F('fetch_offset', 'int64', '0+'),
            F('last_fetched_epoch', 'int32', '12+', default=-1),
            F('log_start_offset', 'int64', '5+', default=-1),
            F('partition_max_bytes', 'int32', '0+'),
        )),
    )),
    F('forgotten_topics_data', '[]ForgottenTopic', '7+', fields=(
        F('topic', 'string', '7-12'),
        F('partitions', '[]int32', '7+'),
    )),
    F('rack_id', 'string', '11+', default=''),
))

RESPONSE = Message('FetchResponse', 1, '0-12', '12+', (
    F('throttle_time_ms', 'int32', '1+'),
    F('error_code', 'int16', '7+'),
    F('session_id', 'int32', '7+', default=0),
    F('responses', '[]FetchableTopicResponse', '0+', fields=(
        F('topic', 'string', '0-12'),
        F('partitions', '[]PartitionData', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
            F('high_watermark', 'int64', '0+'),
            F('last_stable_offset', 'int64', '4+', default=-1),
            F('log_start_offset', 'int64', '5+', default=-1),
            F('diverging_epoch', 'EpochEndOffset', '12+', tag=0, tagged='12+', fields=(
                F('epoch', 'int32', '12+', default=-1),
                F('end_offset', 'int64', '12+', default=-1),
            )),
            F('current_leader', 'LeaderIdAndEpoch', '12+', tag=1, tagged='12+', fields=(
                F('leader_id', 'int32', '12+', default=-1),
                F('leader_epoch', 'int32', '12+', default=-1),
            )),
            F('snapshot_id', 'SnapshotId', '12+', tag=2, tagged='12+', fields=(
                F('end_offset', 'int64', '0+', default=-1),
                F('epoch', 'int32', '0+', default=-1),
            )),
            F('aborted_transactions', '[]AbortedTransaction', '4+', nullable='4+', fields=(
                F('producer_id', 'int64', '4+'),
                F('first_offset', 'int64', '4+'),
            )),
            F('preferred_read_replica', 'int32', '11+', default=-1),
            F('records', 'records', '0+', nullable='0+'),
        )),
    )),
))
