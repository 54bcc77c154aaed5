"""AlterClientQuotas (API key 49, versions 0-1):
set or remove client quotas (KIP-546).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('AlterClientQuotasRequest', 49, '0-1', '1+', (
    F('entries', '[]EntryData', '0+', fields=(
        F('entity', '[]EntityData', '0+', fields=(
            F('entity_type', 'string', '0+'),
            F('entity_name', 'string', '0+', nullable='0+'),
        )),
        F('ops', '[]OpData', '0+', fields=(
            F('key', 'string', '0+'),
            F('value', 'float64', '0+'),
            F('remove', 'bool', '0+'),
        )),
    )),
    F('validate_only', 'bool', '0+'),
))

RESPONSE = Message('AlterClientQuotasResponse', 49, '0-1', '1+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('entries', '[]EntryData', '0+', fields=(
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('entity', '[]EntityData', '0+', fields=(
            F('entity_type', 'string', '0+'),
            F('entity_name', 'string', '0+', nullable='0+'),
        )),
    )),
))

