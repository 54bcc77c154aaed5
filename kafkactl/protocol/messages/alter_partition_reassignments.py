"""AlterPartitionReassignments (API key 45, versions 0-0):
move partitions' replicas to other brokers.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('AlterPartitionReassignmentsRequest', 45, '0', '0+', (
    F('timeout_ms', 'int32', '0+', default=60000),
    F('topics', '[]ReassignableTopic', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]ReassignablePartition', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('replicas', '[]int32', '0+', nullable='0+', default=None),
        )),
    )),
))

RESPONSE = Message('AlterPartitionReassignmentsResponse', 45, '0', '0+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('responses', '[]ReassignableTopicResponse', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]ReassignablePartitionResponse', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
        )),
    )),
))
