"""AlterPartition (API key 56, versions 0-1):
a partition leader asks the controller to change its ISR.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('AlterPartitionRequest', 56, '0-1', '0+', (
    F('broker_id', 'int32', '0+'),
    F('broker_epoch', 'int64', '0+', default=-1),
    F('topics', '[]TopicData', '0+', fields=(
        F('topic_name', 'string', '0-1'),
        F('partitions', '[]PartitionData', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('leader_epoch', 'int32', '0+'),
            F('new_isr', '[]int32', '0-2'),
            F('leader_recovery_state', 'int8', '1+', default=0),
            F('partition_epoch', 'int32', '0+'),
        )),
    )),
))

RESPONSE = Message('AlterPartitionResponse', 56, '0-1', '0+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('topics', '[]TopicData', '0+', fields=(
        F('topic_name', 'string', '0-1'),
        F('partitions', '[]PartitionData', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
            F('leader_id', 'int32', '0+'),
            F('leader_epoch', 'int32', '0+'),
            F('isr', '[]int32', '0+'),
            F('leader_recovery_state', 'int8', '1+', default=0),
            F('partition_epoch', 'int32', '0+'),
        )),
    )),
))
