"""StopReplica (API key 5, versions 0-3):
the controller tells a broker to stop (and maybe delete) replicas.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('StopReplicaRequest', 5, '0-3', '2+', (
    F('controller_id', 'int32', '0+'),
    F('controller_epoch', 'int32', '0+'),
    F('broker_epoch', 'int64', '1+', default=-1),
    F('delete_partitions', 'bool', '0-2'),
    F('ungrouped_partitions', '[]StopReplicaPartitionV0', '0', fields=(
        F('topic_name', 'string', '0'),
        F('partition_index', 'int32', '0'),
    )),
    F('topics', '[]StopReplicaTopicV1', '1-2', fields=(
        F('name', 'string', '1-2'),
        F('partition_indexes', '[]int32', '1-2'),
    )),
    F('topic_states', '[]StopReplicaTopicState', '3+', fields=(
        F('topic_name', 'string', '3+'),
        F('partition_states', '[]StopReplicaPartitionState', '3+', fields=(
            F('partition_index', 'int32', '3+'),
            F('leader_epoch', 'int32', '3+', default=-1),
            F('delete_partition', 'bool', '3+'),
        )),
    )),
))

RESPONSE = Message('StopReplicaResponse', 5, '0-3', '2+', (
    F('error_code', 'int16', '0+'),
    F('partition_errors', '[]StopReplicaPartitionError', '0+', fields=(
        F('topic_name', 'string', '0+'),
        F('partition_index', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
    )),
))
