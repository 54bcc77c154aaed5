"""OffsetCommit (API key 8, versions 0-8):
store a group's committed offsets.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('OffsetCommitRequest', 8, '0-8', '8+', (
    F('group_id', 'string', '0+'),
    F('generation_id_or_member_epoch', 'int32', '1+', default=-1),
    F('member_id', 'string', '1+'),
    F('group_instance_id', 'string', '7+', nullable='7+', default=None),
    F('retention_time_ms', 'int64', '2-4', default=-1),
    F('topics', '[]OffsetCommitRequestTopic', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]OffsetCommitRequestPartition', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('committed_offset', 'int64', '0+'),
            F('committed_leader_epoch', 'int32', '6+', default=-1),
            F('commit_timestamp', 'int64', '1', default=-1),
            F('committed_metadata', 'string', '0+', nullable='0+'),
        )),
    )),
))

RESPONSE = Message('OffsetCommitResponse', 8, '0-8', '8+', (
    F('throttle_time_ms', 'int32', '3+'),
    F('topics', '[]OffsetCommitResponseTopic', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]OffsetCommitResponsePartition', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
        )),
    )),
))
