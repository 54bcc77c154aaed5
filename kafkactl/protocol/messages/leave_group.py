"""LeaveGroup (API key 13, versions 0-4):
leave a consumer group.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('LeaveGroupRequest', 13, '0-4', '4+', (
    F('group_id', 'string', '0+'),
    F('member_id', 'string', '0-2'),
    F('members', '[]MemberIdentity', '3+', fields=(
        F('member_id', 'string', '3+'),
        F('group_instance_id', 'string', '3+', nullable='3+', default=None),
    )),
))

RESPONSE = Message('LeaveGroupResponse', 13, '0-4', '4+', (
    F('throttle_time_ms', 'int32', '1+'),
    F('error_code', 'int16', '0+'),
    F('members', '[]MemberResponse', '3+', fields=(
        F('member_id', 'string', '3+'),
        F('group_instance_id', 'string', '3+', nullable='3+'),
        F('error_code', 'int16', '3+'),
    )),
))
