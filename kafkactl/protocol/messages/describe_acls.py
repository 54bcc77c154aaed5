"""DescribeAcls (API key 29, versions 0-3):
list ACL bindings (SECURITY_DISABLED without an authorizer).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('DescribeAclsRequest', 29, '0-3', '2+', (
    F('resource_type_filter', 'int8', '0+'),
    F('resource_name_filter', 'string', '0+', nullable='0+'),
    F('pattern_type_filter', 'int8', '1+', default=3),
    F('principal_filter', 'string', '0+', nullable='0+'),
    F('host_filter', 'string', '0+', nullable='0+'),
    F('operation', 'int8', '0+'),
    F('permission_type', 'int8', '0+'),
))

RESPONSE = Message('DescribeAclsResponse', 29, '0-3', '2+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('resources', '[]DescribeAclsResource', '0+', fields=(
        F('resource_type', 'int8', '0+'),
        F('resource_name', 'string', '0+'),
        F('pattern_type', 'int8', '1+', default=3),
        F('acls', '[]AclDescription', '0+', fields=(
            F('principal', 'string', '0+'),
            F('host', 'string', '0+'),
            F('operation', 'int8', '0+'),
            F('permission_type', 'int8', '0+'),
        )),
    )),
))
