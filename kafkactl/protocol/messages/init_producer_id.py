"""InitProducerId (API key 22, versions 0-4):
allocate an idempotent / transactional producer id.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('InitProducerIdRequest', 22, '0-4', '2+', (
    F('transactional_id', 'string', '0+', nullable='0+'),
    F('transaction_timeout_ms', 'int32', '0+'),
    F('producer_id', 'int64', '3+', default=-1),
    F('producer_epoch', 'int16', '3+', default=-1),
))

RESPONSE = Message('InitProducerIdResponse', 22, '0-4', '2+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('producer_id', 'int64', '0+', default=-1),
    F('producer_epoch', 'int16', '0+'),
))
