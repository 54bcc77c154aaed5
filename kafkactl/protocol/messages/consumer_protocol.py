"""Version-prefixed data schemas:
ConsumerProtocolSubscription, ConsumerProtocolAssignment.

Drafted from Kafka's JSON specs (other/) by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

SUBSCRIPTION = Message('ConsumerProtocolSubscription', None, '0-3', None, (
    F('topics', '[]string', '0+'),
    F('user_data', 'bytes', '0+', nullable='0+', default=None),
    F('owned_partitions', '[]TopicPartition', '1+', fields=(
        F('topic', 'string', '1+'),
        F('partitions', '[]int32', '1+'),
    )),
    F('generation_id', 'int32', '2+', default=-1),
    F('rack_id', 'string', '3+', nullable='3+', default=None),
))

ASSIGNMENT = Message('ConsumerProtocolAssignment', None, '0-3', None, (
    F('assigned_partitions', '[]TopicPartition', '0+', fields=(
        F('topic', 'string', '0+'),
        F('partitions', '[]int32', '0+'),
    )),
    F('user_data', 'bytes', '0+', nullable='0+', default=None),
))
