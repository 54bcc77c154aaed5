"""DeleteRecords (API key 21, versions 0-2):
move a partition's log start offset forward.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('DeleteRecordsRequest', 21, '0-2', '2+', (
    F('topics', '[]DeleteRecordsTopic', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]DeleteRecordsPartition', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('offset', 'int64', '0+'),
        )),
    )),
    F('timeout_ms', 'int32', '0+'),
))

RESPONSE = Message('DeleteRecordsResponse', 21, '0-2', '2+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('topics', '[]DeleteRecordsTopicResult', '0+', fields=(
        F('name', 'string', '0+'),
        F('partitions', '[]DeleteRecordsPartitionResult', '0+', fields=(
            F('partition_index', 'int32', '0+'),
            F('low_watermark', 'int64', '0+'),
            F('error_code', 'int16', '0+'),
        )),
    )),
))
