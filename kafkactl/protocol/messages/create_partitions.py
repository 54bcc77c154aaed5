"""CreatePartitions (API key 37, versions 0-3):
add partitions to topics.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('CreatePartitionsRequest', 37, '0-3', '2+', (
    F('topics', '[]CreatePartitionsTopic', '0+', fields=(
        F('name', 'string', '0+'),
        F('count', 'int32', '0+'),
        F('assignments', '[]CreatePartitionsAssignment', '0+', nullable='0+', fields=(
            F('broker_ids', '[]int32', '0+'),
        )),
    )),
    F('timeout_ms', 'int32', '0+'),
    F('validate_only', 'bool', '0+'),
))

RESPONSE = Message('CreatePartitionsResponse', 37, '0-3', '2+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('results', '[]CreatePartitionsTopicResult', '0+', fields=(
        F('name', 'string', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+', default=None),
    )),
))
