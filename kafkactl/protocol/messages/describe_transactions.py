"""DescribeTransactions (API key 65, versions 0-0):
transactions' state, producer and partitions (KIP-664).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('DescribeTransactionsRequest', 65, '0', '0+', (
    F('transactional_ids', '[]string', '0+'),
))

RESPONSE = Message('DescribeTransactionsResponse', 65, '0', '0+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('transaction_states', '[]TransactionState', '0+', fields=(
        F('error_code', 'int16', '0+'),
        F('transactional_id', 'string', '0+'),
        F('transaction_state', 'string', '0+'),
        F('transaction_timeout_ms', 'int32', '0+'),
        F('transaction_start_time_ms', 'int64', '0+'),
        F('producer_id', 'int64', '0+'),
        F('producer_epoch', 'int16', '0+'),
        F('topics', '[]TopicData', '0+', fields=(
            F('topic', 'string', '0+'),
            F('partitions', '[]int32', '0+'),
        )),
    )),
))
