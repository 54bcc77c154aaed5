"""ListTransactions (API key 66, versions 0-1):
the transactions a coordinator knows (KIP-664).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('ListTransactionsRequest', 66, '0-1', '0+', (
    F('state_filters', '[]string', '0+'),
    F('producer_id_filters', '[]int64', '0+'),
    F('duration_filter', 'int64', '1+', default=-1),
))

RESPONSE = Message('ListTransactionsResponse', 66, '0-1', '0+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('unknown_state_filters', '[]string', '0+'),
    F('transaction_states', '[]TransactionState', '0+', fields=(
        F('transactional_id', 'string', '0+'),
        F('producer_id', 'int64', '0+'),
        F('transaction_state', 'string', '0+'),
    )),
))
