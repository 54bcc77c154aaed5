"""ElectLeaders (API key 43, versions 0-2):
preferred (or unclean) leader election, through the controller.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('ElectLeadersRequest', 43, '0-2', '2+', (
    F('election_type', 'int8', '1+'),
    F('topic_partitions', '[]TopicPartitions', '0+', nullable='0+', fields=(
        F('topic', 'string', '0+'),
        F('partitions', '[]int32', '0+'),
    )),
    F('timeout_ms', 'int32', '0+', default=60000),
))

RESPONSE = Message('ElectLeadersResponse', 43, '0-2', '2+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '1+'),
    F('replica_election_results', '[]ReplicaElectionResult', '0+', fields=(
        F('topic', 'string', '0+'),
        F('partition_result', '[]PartitionResult', '0+', fields=(
            F('partition_id', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
        )),
    )),
))
