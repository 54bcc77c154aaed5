"""DescribeProducers (API key 61, versions 0-0):
a partition's active producers (KIP-664).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('DescribeProducersRequest', 61, '0', '0+', (
    F('topics', '[]TopicRequest', '0+', fields=(
        F('name', 'string', '0+'),
        F('partition_indexes', '[]int32', '0+'),
    )),
))

RESPONSE = Message('DescribeProducersResponse', 61, '0', '0+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('topics', '[]TopicResponse', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]PartitionResponse', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+', default=None),
            F('active_producers', '[]ProducerState', '0+', fields=(
                F('producer_id', 'int64', '0+'),
                F('producer_epoch', 'int32', '0+'),
                F('last_sequence', 'int32', '0+', default=-1),
                F('last_timestamp', 'int64', '0+', default=-1),
                F('coordinator_epoch', 'int32', '0+'),
                F('current_txn_start_offset', 'int64', '0+', default=-1),
            )),
        )),
    )),
))
