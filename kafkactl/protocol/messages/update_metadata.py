"""UpdateMetadata (API key 6, versions 0-7):
the controller sends every broker the cluster's metadata.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('UpdateMetadataRequest', 6, '0-7', '6+', (
    F('controller_id', 'int32', '0+'),
    F('controller_epoch', 'int32', '0+'),
    F('broker_epoch', 'int64', '5+', default=-1),
    F('ungrouped_partition_states', '[]UpdateMetadataPartitionState', '0-4', fields=(
        F('topic_name', 'string', '0-4'),
        F('partition_index', 'int32', '0+'),
        F('controller_epoch', 'int32', '0+'),
        F('leader', 'int32', '0+'),
        F('leader_epoch', 'int32', '0+'),
        F('isr', '[]int32', '0+'),
        F('zk_version', 'int32', '0+'),
        F('replicas', '[]int32', '0+'),
        F('offline_replicas', '[]int32', '4+'),
    )),
    F('topic_states', '[]UpdateMetadataTopicState', '5+', fields=(
        F('topic_name', 'string', '5+'),
        F('topic_id', 'uuid', '7+'),
        F('partition_states', '[]UpdateMetadataPartitionState', '5+', fields=(
            F('topic_name', 'string', '0-4'),
            F('partition_index', 'int32', '0+'),
            F('controller_epoch', 'int32', '0+'),
            F('leader', 'int32', '0+'),
            F('leader_epoch', 'int32', '0+'),
            F('isr', '[]int32', '0+'),
            F('zk_version', 'int32', '0+'),
            F('replicas', '[]int32', '0+'),
            F('offline_replicas', '[]int32', '4+'),
        )),
    )),
    F('live_brokers', '[]UpdateMetadataBroker', '0+', fields=(
        F('id', 'int32', '0+'),
        F('v0_host', 'string', '0'),
        F('v0_port', 'int32', '0'),
        F('endpoints', '[]UpdateMetadataEndpoint', '1+', fields=(
            F('port', 'int32', '1+'),
            F('host', 'string', '1+'),
            F('listener', 'string', '3+'),
            F('security_protocol', 'int16', '1+'),
        )),
        F('rack', 'string', '2+', nullable='0+'),
    )),
))

RESPONSE = Message('UpdateMetadataResponse', 6, '0-7', '6+', (
    F('error_code', 'int16', '0+'),
))
