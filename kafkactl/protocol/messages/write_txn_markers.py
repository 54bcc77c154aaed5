"""WriteTxnMarkers (API key 27, versions 0-1):
the transaction coordinator has partition leaders write markers.

Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.
"""

from kafkactl.protocol.schema import F, Message

REQUEST = Message('WriteTxnMarkersRequest', 27, '0-1', '1+', (
    F('markers', '[]WritableTxnMarker', '0+', fields=(
        F('producer_id', 'int64', '0+'),
        F('producer_epoch', 'int16', '0+'),
        F('transaction_result', 'bool', '0+'),
        F('topics', '[]WritableTxnMarkerTopic', '0+', fields=(
            F('name', 'string', '0+'),
            F('partition_indexes', '[]int32', '0+'),
        )),
        F('coordinator_epoch', 'int32', '0+'),
    )),
))

RESPONSE = Message('WriteTxnMarkersResponse', 27, '0-1', '1+', (
    F('markers', '[]WritableTxnMarkerResult', '0+', fields=(
        F('producer_id', 'int64', '0+'),
        F('topics', '[]WritableTxnMarkerTopicResult', '0+', fields=(
            F('name', 'string', '0+'),
            F('partitions', '[]WritableTxnMarkerPartitionResult', '0+', fields=(
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
            )),
        )),
    )),
))
