"""CreateAcls (API key 30, versions 0-3):
add ACL bindings (SECURITY_DISABLED without an authorizer).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('CreateAclsRequest', 30, '0-3', '2+', (
    F('creations', '[]AclCreation', '0+', fields=(
        F('resource_type', 'int8', '0+'),
        F('resource_name', 'string', '0+'),
        F('resource_pattern_type', 'int8', '1+', default=3),
        F('principal', 'string', '0+'),
        F('host', 'string', '0+'),
        F('operation', 'int8', '0+'),
        F('permission_type', 'int8', '0+'),
    )),
))

RESPONSE = Message('CreateAclsResponse', 30, '0-3', '2+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('results', '[]AclCreationResult', '0+', fields=(
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
    )),
))
