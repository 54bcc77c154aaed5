# Types of the compiled twins in _kernels.pyx (mypy sees this stub, not the .so).
Buffer = bytes | bytearray | memoryview

API: int

def walk(data: Buffer, pos: int, stop: int, first: int, count: int, want_keyless: bool,
         keyless: list[int]) -> bool: ...
def scan(d: Buffer, count: int
         ) -> tuple[list[bytes | memoryview | None], list[bytes | memoryview | None],
                                        list[int]] | None: ...
def prove(data: Buffer, pos: int, stop: int, count: int, want_keyless: bool,
          keyless: list[int]) -> tuple[int, int]: ...
