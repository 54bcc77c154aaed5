"""JoinGroup (API key 11, versions 0-7):
join a consumer group (first rebalance step).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('JoinGroupRequest', 11, '0-7', '6+', (
    F('group_id', 'string', '0+'),
    F('session_timeout_ms', 'int32', '0+'),
    F('rebalance_timeout_ms', 'int32', '1+', default=-1),
    F('member_id', 'string', '0+'),
    F('group_instance_id', 'string', '5+', nullable='5+', default=None),
    F('protocol_type', 'string', '0+'),
    F('protocols', '[]JoinGroupRequestProtocol', '0+', fields=(
        F('name', 'string', '0+'),
        F('metadata', 'bytes', '0+'),
    )),
))

RESPONSE = Message('JoinGroupResponse', 11, '0-7', '6+', (
    F('throttle_time_ms', 'int32', '2+'),
    F('error_code', 'int16', '0+'),
    F('generation_id', 'int32', '0+', default=-1),
    F('protocol_type', 'string', '7+', nullable='7+', default=None),
    F('protocol_name', 'string', '0+', nullable='7+'),
    F('leader', 'string', '0+'),
    F('member_id', 'string', '0+'),
    F('members', '[]JoinGroupResponseMember', '0+', fields=(
        F('member_id', 'string', '0+'),
        F('group_instance_id', 'string', '5+', nullable='5+', default=None),
        F('metadata', 'bytes', '0+'),
    )),
))
