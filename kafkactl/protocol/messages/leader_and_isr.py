"""LeaderAndIsr (API key 4, versions 0-6):
the controller tells a broker which partitions it leads or follows.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('LeaderAndIsrRequest', 4, '0-6', '4+', (
    F('controller_id', 'int32', '0+'),
    F('controller_epoch', 'int32', '0+'),
    F('broker_epoch', 'int64', '2+', default=-1),
    F('type', 'int8', '5+'),
    F('ungrouped_partition_states', '[]LeaderAndIsrPartitionState', '0-1', fields=(
        F('topic_name', 'string', '0-1'),
        F('partition_index', 'int32', '0+'),
        F('controller_epoch', 'int32', '0+'),
        F('leader', 'int32', '0+'),
        F('leader_epoch', 'int32', '0+'),
        F('isr', '[]int32', '0+'),
        F('partition_epoch', 'int32', '0+'),
        F('replicas', '[]int32', '0+'),
        F('adding_replicas', '[]int32', '3+'),
        F('removing_replicas', '[]int32', '3+'),
        F('is_new', 'bool', '1+', default=False),
        F('leader_recovery_state', 'int8', '6+', default=0),
    )),
    F('topic_states', '[]LeaderAndIsrTopicState', '2+', fields=(
        F('topic_name', 'string', '2+'),
        F('topic_id', 'uuid', '5+'),
        F('partition_states', '[]LeaderAndIsrPartitionState', '2+', fields=(
            F('topic_name', 'string', '0-1'),
            F('partition_index', 'int32', '0+'),
            F('controller_epoch', 'int32', '0+'),
            F('leader', 'int32', '0+'),
            F('leader_epoch', 'int32', '0+'),
            F('isr', '[]int32', '0+'),
            F('partition_epoch', 'int32', '0+'),
            F('replicas', '[]int32', '0+'),
            F('adding_replicas', '[]int32', '3+'),
            F('removing_replicas', '[]int32', '3+'),
            F('is_new', 'bool', '1+', default=False),
            F('leader_recovery_state', 'int8', '6+', default=0),
        )),
    )),
    F('live_leaders', '[]LeaderAndIsrLiveLeader', '0+', fields=(
        F('broker_id', 'int32', '0+'),
        F('host_name', 'string', '0+'),
        F('port', 'int32', '0+'),
    )),
))

RESPONSE = Message('LeaderAndIsrResponse', 4, '0-6', '4+', (
    F('error_code', 'int16', '0+'),
    F('partition_errors', '[]LeaderAndIsrPartitionError', '0-4', fields=(
        F('topic_name', 'string', '0-4'),
        F('partition_index', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
    )),
    F('topics', '[]LeaderAndIsrTopicError', '5+', fields=(
        F('topic_id', 'uuid', '5+'),
        F('partition_errors', '[]LeaderAndIsrPartitionError', '5+', fields=(
            F('topic_name', 'string', '0-4'),
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
        )),
    )),
))
