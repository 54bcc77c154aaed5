# Types of the compiled twin in _log_kernels.pyx (mypy sees this stub, not the .so).
from collections.abc import Callable
from typing import Any

API: int

def records_max_timestamp(data: bytes | bytearray | memoryview, start: int, stop: int,
                          count: int, first_ts: int) -> int | None: ...

class BatchValidator:
    def __init__(self, reference: Callable[..., list[Any]], batch_info: type,
                 check_records: Callable[..., Any], prove: Callable[..., Any] | None,
                 crc32c: Callable[..., int]) -> None: ...
    def validate(self, buf: memoryview, *, max_message_bytes: int, timestamp_type: str,
                 max_timestamp_difference_ms: int, now_ms: int, produce_version: int,
                 single_batch: bool, compacted: bool = ..., topic_partition: str = ...
                 ) -> list[Any]: ...
