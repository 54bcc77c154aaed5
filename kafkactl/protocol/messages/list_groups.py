"""ListGroups (API key 16, versions 0-4):
groups known to a coordinator.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('ListGroupsRequest', 16, '0-4', '3+', (
    F('states_filter', '[]string', '4+'),
))

RESPONSE = Message('ListGroupsResponse', 16, '0-4', '3+', (
    F('throttle_time_ms', 'int32', '1+'),
    F('error_code', 'int16', '0+'),
    F('groups', '[]ListedGroup', '0+', fields=(
        F('group_id', 'string', '0+'),
        F('protocol_type', 'string', '0+'),
        F('group_state', 'string', '4+'),
    )),
))
