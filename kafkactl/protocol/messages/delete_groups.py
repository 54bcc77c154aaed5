"""DeleteGroups (API key 42, versions 0-2):
delete consumer groups.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('DeleteGroupsRequest', 42, '0-2', '2+', (
    F('groups_names', '[]string', '0+'),
))

RESPONSE = Message('DeleteGroupsResponse', 42, '0-2', '2+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('results', '[]DeletableGroupResult', '0+', fields=(
        F('group_id', 'string', '0+'),
        F('error_code', 'int16', '0+'),
    )),
))
