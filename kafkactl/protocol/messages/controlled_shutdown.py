"""ControlledShutdown (API key 7, versions 0-3):
a stopping broker asks the controller to move its leaders away.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('ControlledShutdownRequest', 7, '0-3', '3+', (
    F('broker_id', 'int32', '0+'),
    F('broker_epoch', 'int64', '2+', default=-1),
))

RESPONSE = Message('ControlledShutdownResponse', 7, '0-3', '3+', (
    F('error_code', 'int16', '0+'),
    F('remaining_partitions', '[]RemainingPartition', '0+', fields=(
        F('topic_name', 'string', '0+'),
        F('partition_index', 'int32', '0+'),
    )),
))
