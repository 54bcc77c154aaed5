"""ApiVersions (API key 18, versions 0-4):
the version handshake (responses always use header v0).

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('ApiVersionsRequest', 18, '0-4', '3+', (
    F('client_software_name', 'string', '3+'),
    F('client_software_version', 'string', '3+'),
))

RESPONSE = Message('ApiVersionsResponse', 18, '0-4', '3+', (
    F('error_code', 'int16', '0+'),
    F('api_keys', '[]ApiVersion', '0+', fields=(
        F('api_key', 'int16', '0+'),
        F('min_version', 'int16', '0+'),
        F('max_version', 'int16', '0+'),
    )),
    F('throttle_time_ms', 'int32', '1+'),
    F('supported_features', '[]SupportedFeatureKey', '3+', tag=0, tagged='3+', fields=(
        F('name', 'string', '3+'),
        F('min_version', 'int16', '3+'),
        F('max_version', 'int16', '3+'),
    )),
    F('finalized_features_epoch', 'int64', '3+', tag=1, tagged='3+', default=-1),
    F('finalized_features', '[]FinalizedFeatureKey', '3+', tag=2, tagged='3+', fields=(
        F('name', 'string', '3+'),
        F('max_version_level', 'int16', '3+'),
        F('min_version_level', 'int16', '3+'),
    )),
    F('zk_migration_ready', 'bool', '3+', tag=3, tagged='3+', default=False),
))
