"""Heartbeat (API key 12, versions 0-4):
keep a group membership alive.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('HeartbeatRequest', 12, '0-4', '4+', (
    F('group_id', 'string', '0+'),
    F('generation_id', 'int32', '0+'),
    F('member_id', 'string', '0+'),
    F('group_instance_id', 'string', '3+', nullable='3+', default=None),
))

RESPONSE = Message('HeartbeatResponse', 12, '0-4', '4+', (
    F('throttle_time_ms', 'int32', '1+'),
    F('error_code', 'int16', '0+'),
))
