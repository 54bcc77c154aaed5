"""Version-prefixed data schemas of `__transaction_state` records:
TransactionLogKey, TransactionLogValue.

Written from Kafka's TransactionLogKey.json / TransactionLogValue.json (transaction-coordinator
module; not among the shared specs): the key is version 0; the value is version 0 (what a
coordinator of transaction version 1 writes) or 1 (flexible, with tagged fields).
"""

from kafkactl.protocol.schema import F, Message

TRANSACTION_LOG_KEY = Message('TransactionLogKey', None, '0', None, (
    F('transactional_id', 'string', '0'),
))

TRANSACTION_LOG_VALUE = Message('TransactionLogValue', None, '0-1', '1+', (
    F('producer_id', 'int64', '0+'),
    F('previous_producer_id', 'int64', '1+', tag=0, tagged='1+', default=-1),
    F('next_producer_id', 'int64', '1+', tag=1, tagged='1+', default=-1),
    F('producer_epoch', 'int16', '0+'),
    F('transaction_timeout_ms', 'int32', '0+'),
    F('transaction_status', 'int8', '0+'),
    F('transaction_partitions', '[]PartitionsSchema', '0+', nullable='0+', fields=(
        F('topic', 'string', '0+'),
        F('partition_ids', '[]int32', '0+'),
    )),
    F('transaction_last_update_timestamp_ms', 'int64', '0+'),
    F('transaction_start_timestamp_ms', 'int64', '0+'),
    F('client_transaction_version', 'int16', '1+', tag=2, tagged='1+', default=0),
))
