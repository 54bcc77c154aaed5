"""AlterReplicaLogDirs (API key 34, versions 0-2):
move replicas to other log directories of their broker.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('AlterReplicaLogDirsRequest', 34, '0-2', '2+', (
    F('dirs', '[]AlterReplicaLogDir', '0+', fields=(
        F('path', 'string', '0+'),
        F('topics', '[]AlterReplicaLogDirTopic', '0+', fields=(
            F('name', 'string', '0+'),
            F('partitions', '[]int32', '0+'),
        )),
    )),
))

RESPONSE = Message('AlterReplicaLogDirsResponse', 34, '0-2', '2+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('results', '[]AlterReplicaLogDirTopicResult', '0+', fields=(
        F('topic_name', 'string', '0+'),
        F('partitions', '[]AlterReplicaLogDirPartitionResult', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
        )),
    )),
))
