"""kafkactl.record: Kafka's record formats as pure functions over bytes (sans-IO).

Magic 2 record batches (`batch_header`: the one header layout; `batch`: the reader;
`builder`; `stamp`: offsets stamped for an append), legacy magic 0/1 message sets
(`legacy`), the codecs, CRCs and varints they use, the magic-agnostic `memory_records`
layer (iteration and the recovery `scan`) and format conversion (`convert`). See
docs/internals.md.
"""

from kafkactl.record.batch import Record, RecordBatch, RecordBatchBuilder, TimestampType
from kafkactl.record.codecs import Compression
from kafkactl.record.errors import CorruptRecordError, InvalidRecordError, RecordError
from kafkactl.record.memory_records import LegacyBatch, ScanResult, iter_batches, scan

__all__ = [
    "Compression", "CorruptRecordError", "InvalidRecordError", "LegacyBatch", "Record",
    "RecordBatch", "RecordBatchBuilder", "RecordError", "ScanResult", "TimestampType",
    "iter_batches", "scan",
]
