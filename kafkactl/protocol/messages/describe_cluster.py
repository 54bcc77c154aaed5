"""DescribeCluster (API key 60, versions 0-1):
cluster id, controller and brokers.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('DescribeClusterRequest', 60, '0-1', '0+', (
    F('include_cluster_authorized_operations', 'bool', '0+'),
    F('endpoint_type', 'int8', '1+', default=1),
))

RESPONSE = Message('DescribeClusterResponse', 60, '0-1', '0+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+', default=None),
    F('endpoint_type', 'int8', '1+', default=1),
    F('cluster_id', 'string', '0+'),
    F('controller_id', 'int32', '0+', default=-1),
    F('brokers', '[]DescribeClusterBroker', '0+', fields=(
        F('broker_id', 'int32', '0+'),
        F('host', 'string', '0+'),
        F('port', 'int32', '0+'),
        F('rack', 'string', '0+', nullable='0+', default=None),
    )),
    F('cluster_authorized_operations', 'int32', '0+', default=-2147483648),
))
