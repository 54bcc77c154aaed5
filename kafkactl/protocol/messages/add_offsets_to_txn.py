"""AddOffsetsToTxn (API key 25, versions 0-4):
add a group's offsets partition to a transaction.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('AddOffsetsToTxnRequest', 25, '0-4', '3+', (
    F('transactional_id', 'string', '0+'),
    F('producer_id', 'int64', '0+'),
    F('producer_epoch', 'int16', '0+'),
    F('group_id', 'string', '0+'),
))

RESPONSE = Message('AddOffsetsToTxnResponse', 25, '0-4', '3+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
))
