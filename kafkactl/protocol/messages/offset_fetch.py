"""OffsetFetch (API key 9, versions 0-8):
read a group's committed offsets.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('OffsetFetchRequest', 9, '0-8', '6+', (
    F('group_id', 'string', '0-7'),
    F('topics', '[]OffsetFetchRequestTopic', '0-7', nullable='2-7', fields=(
        F('name', 'string', '0-7'),
        F('partition_indexes', '[]int32', '0-7'),
    )),
    F('groups', '[]OffsetFetchRequestGroup', '8+', fields=(
        F('group_id', 'string', '8+'),
        F('topics', '[]OffsetFetchRequestTopics', '8+', nullable='8+', fields=(
            F('name', 'string', '8+'),
            F('partition_indexes', '[]int32', '8+'),
        )),
    )),
    F('require_stable', 'bool', '7+', default=False),
))

RESPONSE = Message('OffsetFetchResponse', 9, '0-8', '6+', (
    F('throttle_time_ms', 'int32', '3+'),
    F('topics', '[]OffsetFetchResponseTopic', '0-7', fields=(
        F('name', 'string', '0-7'),
        F('partitions', '[]OffsetFetchResponsePartition', '0-7', fields=(
            F('partition_index', 'int32', '0-7'),
            F('committed_offset', 'int64', '0-7'),
            F('committed_leader_epoch', 'int32', '5-7', default=-1),
            F('metadata', 'string', '0-7', nullable='0-7'),
            F('error_code', 'int16', '0-7'),
        )),
    )),
    F('error_code', 'int16', '2-7', default=0),
    F('groups', '[]OffsetFetchResponseGroup', '8+', fields=(
        F('group_id', 'string', '8+'),
        F('topics', '[]OffsetFetchResponseTopics', '8+', fields=(
            F('name', 'string', '8+'),
            F('partitions', '[]OffsetFetchResponsePartitions', '8+', fields=(
                F('partition_index', 'int32', '8+'),
                F('committed_offset', 'int64', '8+'),
                F('committed_leader_epoch', 'int32', '8+', default=-1),
                F('metadata', 'string', '8+', nullable='8+'),
                F('error_code', 'int16', '8+'),
            )),
        )),
        F('error_code', 'int16', '8+', default=0),
    )),
))
