"""DeleteAcls (API key 31, versions 0-3):
remove ACL bindings (SECURITY_DISABLED without an authorizer).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('DeleteAclsRequest', 31, '0-3', '2+', (
    F('filters', '[]DeleteAclsFilter', '0+', fields=(
        F('resource_type_filter', 'int8', '0+'),
        F('resource_name_filter', 'string', '0+', nullable='0+'),
        F('pattern_type_filter', 'int8', '1+', default=3),
        F('principal_filter', 'string', '0+', nullable='0+'),
        F('host_filter', 'string', '0+', nullable='0+'),
        F('operation', 'int8', '0+'),
        F('permission_type', 'int8', '0+'),
    )),
))

RESPONSE = Message('DeleteAclsResponse', 31, '0-3', '2+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('filter_results', '[]DeleteAclsFilterResult', '0+', fields=(
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('matching_acls', '[]DeleteAclsMatchingAcl', '0+', fields=(
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
            F('resource_type', 'int8', '0+'),
            F('resource_name', 'string', '0+'),
            F('pattern_type', 'int8', '1+', default=3),
            F('principal', 'string', '0+'),
            F('host', 'string', '0+'),
            F('operation', 'int8', '0+'),
            F('permission_type', 'int8', '0+'),
        )),
    )),
))
