"""EndTxn (API key 26, versions 0-4):
commit or abort a transaction.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('EndTxnRequest', 26, '0-4', '3+', (
    F('transactional_id', 'string', '0+'),
    F('producer_id', 'int64', '0+'),
    F('producer_epoch', 'int16', '0+'),
    F('committed', 'bool', '0+'),
))

RESPONSE = Message('EndTxnResponse', 26, '0-4', '3+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
))
