"""DescribeClientQuotas (API key 48, versions 0-1):
client quotas matching a filter (KIP-546).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('DescribeClientQuotasRequest', 48, '0-1', '1+', (
    F('components', '[]ComponentData', '0+', fields=(
        F('entity_type', 'string', '0+'),
        F('match_type', 'int8', '0+'),
        F('match', 'string', '0+', nullable='0+'),
    )),
    F('strict', 'bool', '0+'),
))

RESPONSE = Message('DescribeClientQuotasResponse', 48, '0-1', '1+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('entries', '[]EntryData', '0+', nullable='0+', fields=(
        F('entity', '[]EntityData', '0+', fields=(
            F('entity_type', 'string', '0+'),
            F('entity_name', 'string', '0+', nullable='0+'),
        )),
        F('values', '[]ValueData', '0+', fields=(
            F('key', 'string', '0+'),
            F('value', 'float64', '0+'),
        )),
    )),
))

