"""OffsetDelete (API key 47, versions 0-0):
delete a group's committed offsets for partitions.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('OffsetDeleteRequest', 47, '0', None, (
    F('group_id', 'string', '0+'),
    F('topics', '[]OffsetDeleteRequestTopic', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]OffsetDeleteRequestPartition', '0+', fields=(
            F('partition_index', 'int32', '0+'),
        )),
    )),
))

RESPONSE = Message('OffsetDeleteResponse', 47, '0', None, (
    F('error_code', 'int16', '0+'),
    F('throttle_time_ms', 'int32', '0+'),
    F('topics', '[]OffsetDeleteResponseTopic', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]OffsetDeleteResponsePartition', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
        )),
    )),
))
