# Types of the compiled twins in _kernels.pyx (mypy sees this stub, not the .so).
from collections.abc import Sequence

Buffer = bytes | bytearray | memoryview

API: int

def walk(data: Buffer, pos: int, stop: int, first: int, count: int, want_keyless: bool,
         keyless: list[int]) -> bool: ...
def prove(data: Buffer, pos: int, stop: int, count: int, want_keyless: bool,
          keyless: list[int]) -> tuple[int, int]: ...
def murmur2(data: Buffer) -> int: ...
def encode_values(values: Sequence[Buffer], start: int, first_delta: int, room: int
                  ) -> tuple[list[bytes], int, int]: ...
def encode_key_values(keys: Sequence[Buffer | None], values: Sequence[Buffer], start: int,
                      first_delta: int, room: int) -> tuple[list[bytes], int, int]: ...
TOKENS: frozenset[int]
def render(data: Buffer, count: int, base_offset: int, base_ts: int, log_append: bool,
           max_ts: int, start: int, literals: list[bytes], tokens: bytes
           ) -> tuple[bytes, int, bytes] | None: ...
