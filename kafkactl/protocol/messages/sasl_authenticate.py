"""SaslAuthenticate (API key 36, versions 0-2):
carry one SASL token in a Kafka request (KIP-152, KIP-368).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('SaslAuthenticateRequest', 36, '0-2', '2+', (
    F('auth_bytes', 'bytes', '0+'),
))

RESPONSE = Message('SaslAuthenticateResponse', 36, '0-2', '2+', (
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('auth_bytes', 'bytes', '0+'),
    F('session_lifetime_ms', 'int64', '1+', default=0),
))
