"""ListOffsets (API key 2, versions 0-7):
earliest / latest / by-timestamp offsets.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('ListOffsetsRequest', 2, '0-7', '6+', (
    F('replica_id', 'int32', '0+'),
    F('isolation_level', 'int8', '2+'),
    F('topics', '[]ListOffsetsTopic', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]ListOffsetsPartition', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('current_leader_epoch', 'int32', '4+', default=-1),
            F('timestamp', 'int64', '0+'),
            F('max_num_offsets', 'int32', '0', default=1),
        )),
    )),
))

RESPONSE = Message('ListOffsetsResponse', 2, '0-7', '6+', (
    F('throttle_time_ms', 'int32', '2+'),
    F('topics', '[]ListOffsetsTopicResponse', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]ListOffsetsPartitionResponse', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
            F('old_style_offsets', '[]int64', '0'),
            F('timestamp', 'int64', '1+', default=-1),
            F('offset', 'int64', '1+', default=-1),
            F('leader_epoch', 'int32', '4+', default=-1),
        )),
    )),
))
