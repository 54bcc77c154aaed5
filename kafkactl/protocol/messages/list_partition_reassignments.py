"""ListPartitionReassignments (API key 46, versions 0-0):
the partition reassignments in progress.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('ListPartitionReassignmentsRequest', 46, '0', '0+', (
    F('timeout_ms', 'int32', '0+', default=60000),
    F('topics', '[]ListPartitionReassignmentsTopics', '0+', nullable='0+', default=None, fields=(
        F('name', 'string', '0+'),
        F('partition_indexes', '[]int32', '0+'),
    )),
))

RESPONSE = Message('ListPartitionReassignmentsResponse', 46, '0', '0+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('topics', '[]OngoingTopicReassignment', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]OngoingPartitionReassignment', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('replicas', '[]int32', '0+'),
            F('adding_replicas', '[]int32', '0+'),
            F('removing_replicas', '[]int32', '0+'),
        )),
    )),
))
