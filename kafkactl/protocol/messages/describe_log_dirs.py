"""DescribeLogDirs (API key 35, versions 0-4):
log directories, the replicas in each and their sizes.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('DescribeLogDirsRequest', 35, '0-4', '2+', (
    F('topics', '[]DescribableLogDirTopic', '0+', nullable='0+', fields=(
        F('topic', 'string', '0+'),
        F('partitions', '[]int32', '0+'),
    )),
))

RESPONSE = Message('DescribeLogDirsResponse', 35, '0-4', '2+', (
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '3+'),
    F('results', '[]DescribeLogDirsResult', '0+', fields=(
        F('error_code', 'int16', '0+'),
        F('log_dir', 'string', '0+'),
        F('topics', '[]DescribeLogDirsTopic', '0+', fields=(
            F('name', 'string', '0+'),
            F('partitions', '[]DescribeLogDirsPartition', '0+', fields=(
                F('partition_index', 'int32', '0+'),
                F('partition_size', 'int64', '0+'),
                F('offset_lag', 'int64', '0+'),
                F('is_future_key', 'bool', '0+'),
            )),
        )),
        F('total_bytes', 'int64', '4+', default=-1),
        F('usable_bytes', 'int64', '4+', default=-1),
    )),
))

