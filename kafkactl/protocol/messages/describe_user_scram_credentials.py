"""DescribeUserScramCredentials (API key 50, versions 0-0):
list users' SCRAM mechanisms and iterations (KIP-554).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('DescribeUserScramCredentialsRequest', 50, '0', '0+', (
    F('users', '[]UserName', '0+', nullable='0+', fields=(
        F('name', 'string', '0+'),
    )),
))

RESPONSE = Message('DescribeUserScramCredentialsResponse', 50, '0', '0+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('results', '[]DescribeUserScramCredentialsResult', '0+', fields=(
        F('user', 'string', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('credential_infos', '[]CredentialInfo', '0+', fields=(
            F('mechanism', 'int8', '0+'),
            F('iterations', 'int32', '0+'),
        )),
    )),
))
