"""TxnOffsetCommit (API key 28, versions 0-4):
commit a group's offsets in a transaction (pending until its marker).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('TxnOffsetCommitRequest', 28, '0-4', '3+', (
    F('transactional_id', 'string', '0+'),
    F('group_id', 'string', '0+'),
    F('producer_id', 'int64', '0+'),
    F('producer_epoch', 'int16', '0+'),
    F('generation_id', 'int32', '3+', default=-1),
    F('member_id', 'string', '3+', default=''),
    F('group_instance_id', 'string', '3+', nullable='3+', default=None),
    F('topics', '[]TxnOffsetCommitRequestTopic', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]TxnOffsetCommitRequestPartition', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('committed_offset', 'int64', '0+'),
            F('committed_leader_epoch', 'int32', '2+', default=-1),
            F('committed_metadata', 'string', '0+', nullable='0+'),
        )),
    )),
))

RESPONSE = Message('TxnOffsetCommitResponse', 28, '0-4', '3+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('topics', '[]TxnOffsetCommitResponseTopic', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]TxnOffsetCommitResponsePartition', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
        )),
    )),
))

