"""Produce (API key 0, versions 0-9):
append record batches to partitions.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('ProduceRequest', 0, '0-9', '9+', (
    F('transactional_id', 'string', '3+', nullable='3+', default=None),
    F('acks', 'int16', '0+'),
    F('timeout_ms', 'int32', '0+'),
    F('topic_data', '[]TopicProduceData', '0+', fields=(
        F('name', 'string', '0+'),
        F('partition_data', '[]PartitionProduceData', '0+', fields=(
            F('index', 'int32', '0+'),
            F('records', 'records', '0+', nullable='0+'),
        )),
    )),
))

RESPONSE = Message('ProduceResponse', 0, '0-9', '9+', (
    F('responses', '[]TopicProduceResponse', '0+', fields=(
        F('name', 'string', '0+'),
        F('partition_responses', '[]PartitionProduceResponse', '0+', fields=(
            F('index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
            F('base_offset', 'int64', '0+'),
            F('log_append_time_ms', 'int64', '2+', default=-1),
            F('log_start_offset', 'int64', '5+', default=-1),
            F('record_errors', '[]BatchIndexAndErrorMessage', '8+', fields=(
                F('batch_index', 'int32', '8+'),
                F('batch_index_error_message', 'string', '8+', nullable='8+', default=None),
            )),
            F('error_message', 'string', '8+', nullable='8+', default=None),
        )),
    )),
    F('throttle_time_ms', 'int32', '1+', default=0),
))
