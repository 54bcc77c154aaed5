"""AlterUserScramCredentials (API key 51, versions 0-0):
upsert or delete salted SCRAM credentials (KIP-554).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('AlterUserScramCredentialsRequest', 51, '0', '0+', (
    F('deletions', '[]ScramCredentialDeletion', '0+', fields=(
        F('name', 'string', '0+'),
        F('mechanism', 'int8', '0+'),
    )),
    F('upsertions', '[]ScramCredentialUpsertion', '0+', fields=(
        F('name', 'string', '0+'),
        F('mechanism', 'int8', '0+'),
        F('iterations', 'int32', '0+'),
        F('salt', 'bytes', '0+'),
        F('salted_password', 'bytes', '0+'),
    )),
))

RESPONSE = Message('AlterUserScramCredentialsResponse', 51, '0', '0+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('results', '[]AlterUserScramCredentialsResult', '0+', fields=(
        F('user', 'string', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
    )),
))
