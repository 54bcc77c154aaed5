"""AddPartitionsToTxn (API key 24, versions 0-5):
add partitions to a transaction (v4+: brokers verify, KIP-890).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('AddPartitionsToTxnRequest', 24, '0-5', '3+', (
    F('transactions', '[]AddPartitionsToTxnTransaction', '4+', fields=(
        F('transactional_id', 'string', '4+'),
        F('producer_id', 'int64', '4+'),
        F('producer_epoch', 'int16', '4+'),
        F('verify_only', 'bool', '4+', default=False),
        F('topics', '[]AddPartitionsToTxnTopic', '4+', fields=(
            F('name', 'string', '0+'),
            F('partitions', '[]int32', '0+'),
        )),
    )),
    F('v3_and_below_transactional_id', 'string', '0-3'),
    F('v3_and_below_producer_id', 'int64', '0-3'),
    F('v3_and_below_producer_epoch', 'int16', '0-3'),
    F('v3_and_below_topics', '[]AddPartitionsToTxnTopic', '0-3', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]int32', '0+'),
    )),
))

RESPONSE = Message('AddPartitionsToTxnResponse', 24, '0-5', '3+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '4+'),
    F('results_by_transaction', '[]AddPartitionsToTxnResult', '4+', fields=(
        F('transactional_id', 'string', '4+'),
        F('topic_results', '[]AddPartitionsToTxnTopicResult', '4+', fields=(
            F('name', 'string', '0+'),
            F('results_by_partition', '[]AddPartitionsToTxnPartitionResult', '0+', fields=(
                F('partition_index', 'int32', '0+'),
                F('partition_error_code', 'int16', '0+'),
            )),
        )),
    )),
    F('results_by_topic_v3_and_below', '[]AddPartitionsToTxnTopicResult', '0-3', fields=(
        F('name', 'string', '0+'),
        F('results_by_partition', '[]AddPartitionsToTxnPartitionResult', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('partition_error_code', 'int16', '0+'),
        )),
    )),
))
