# Types of the compiled twins in _codec_kernels.pyx (mypy sees this stub, not the .so).
from collections.abc import Callable
from typing import Any

Buffer = bytes | bytearray | memoryview

API: int

def decode_produce_frame(frame: Buffer, version: int
                         ) -> tuple[str | None, dict[str, Any]] | None: ...
def encode_produce_response(correlation_id: int, version: int, body: Any) -> list[bytes] | None: ...

def encode_metadata_response(correlation_id: int, version: int,
                             body: Any) -> list[bytes] | None: ...

def decode_fetch_frame(frame: Buffer, version: int
                       ) -> tuple[str | None, dict[str, Any]] | None: ...

def encode_fetch_response(correlation_id: int, version: int, body: Any) -> list[Any] | None: ...

class RequestDecoder:
    twin: Callable[[Buffer, int], tuple[str | None, dict[str, Any]] | None]
    def __init__(self, twin: Callable[[Buffer, int], tuple[str | None, dict[str, Any]] | None],
                 version: int, reference: Callable[[Any], tuple[str | None, Any]]) -> None: ...
    def decode(self, frame: Buffer) -> tuple[str | None, Any]: ...

class ResponseEncoder:
    twin: Callable[[int, int, Any], list[Any] | None]
    def __init__(self, twin: Callable[[int, int, Any], list[Any] | None], version: int,
                 reference: Callable[[int, Any], list[Any]]) -> None: ...
    def encode(self, correlation_id: int, body: Any) -> list[Any]: ...
