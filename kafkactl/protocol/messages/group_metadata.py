"""Version-prefixed data schemas:
OffsetCommitKey, OffsetCommitValue, GroupMetadataKey, GroupMetadataValue.

Drafted from Kafka's JSON specs (other/) by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

OFFSET_COMMIT_KEY = Message('OffsetCommitKey', None, '0-1', None, (
    F('group', 'string', '0-1'),
    F('topic', 'string', '0-1'),
    F('partition', 'int32', '0-1'),
))

OFFSET_COMMIT_VALUE = Message('OffsetCommitValue', None, '0-4', '4+', (
    F('offset', 'int64', '0+'),
    F('leader_epoch', 'int32', '3+', default=-1),
    F('metadata', 'string', '0+'),
    F('commit_timestamp', 'int64', '0+'),
    F('expire_timestamp', 'int64', '1', default=-1),
))

GROUP_METADATA_KEY = Message('GroupMetadataKey', None, '2', None, (
    F('group', 'string', '2'),
))

GROUP_METADATA_VALUE = Message('GroupMetadataValue', None, '0-4', '4+', (
    F('protocol_type', 'string', '0+'),
    F('generation', 'int32', '0+'),
    F('protocol', 'string', '0+', nullable='0+'),
    F('leader', 'string', '0+', nullable='0+'),
    F('current_state_timestamp', 'int64', '2+', default=-1),
    F('members', '[]MemberMetadata', '0+', fields=(
        F('member_id', 'string', '0+'),
        F('group_instance_id', 'string', '3+', nullable='3+', default=None),
        F('client_id', 'string', '0+'),
        F('client_host', 'string', '0+'),
        F('rebalance_timeout', 'int32', '1+', default=-1),
        F('session_timeout', 'int32', '0+'),
        F('subscription', 'bytes', '0+'),
        F('assignment', 'bytes', '0+'),
    )),
))
