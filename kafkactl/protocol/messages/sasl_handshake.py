"""SaslHandshake (API key 17, versions 0-1):
pick a SASL mechanism (KIP-43).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('SaslHandshakeRequest', 17, '0-1', None, (
    F('mechanism', 'string', '0+'),
))

RESPONSE = Message('SaslHandshakeResponse', 17, '0-1', None, (
    F('error_code', 'int16', '0+'),
    F('mechanisms', '[]string', '0+'),
))
