"""SyncGroup (API key 14, versions 0-5):
distribute the leader's assignment (second rebalance step).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('SyncGroupRequest', 14, '0-5', '4+', (
    F('group_id', 'string', '0+'),
    F('generation_id', 'int32', '0+'),
    F('member_id', 'string', '0+'),
    F('group_instance_id', 'string', '3+', nullable='3+', default=None),
    F('protocol_type', 'string', '5+', nullable='5+', default=None),
    F('protocol_name', 'string', '5+', nullable='5+', default=None),
    F('assignments', '[]SyncGroupRequestAssignment', '0+', fields=(
        F('member_id', 'string', '0+'),
        F('assignment', 'bytes', '0+'),
    )),
))

RESPONSE = Message('SyncGroupResponse', 14, '0-5', '4+', (
    F('throttle_time_ms', 'int32', '1+'),
    F('error_code', 'int16', '0+'),
    F('protocol_type', 'string', '5+', nullable='5+', default=None),
    F('protocol_name', 'string', '5+', nullable='5+', default=None),
    F('assignment', 'bytes', '0+'),
))
