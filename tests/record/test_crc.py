"""kafkactl.record.crc: CRC-32C from the `crc32c` package's C module, loaded without the
package's __init__ (start-up cost), equal to the package's own function."""

from __future__ import annotations

import random
import subprocess
import sys

import crc32c as packaged

from kafkactl.record import crc


def test_known_check_values() -> None:
    assert crc.crc32c(b"123456789") == 0xE3069283  # the CRC-32C catalogue's check value
    assert crc.crc32(b"123456789") == 0xCBF43926


def test_equal_to_the_package_on_buffers_of_every_kind_and_continued() -> None:
    rng = random.Random(7)
    for size in (0, 1, 7, 8, 9, 63, 64, 65, 4095, 4096, 4097, 100_000):
        data = rng.randbytes(size)
        want = packaged.crc32c(data)
        assert crc.crc32c(data) == want
        assert crc.crc32c(bytearray(data)) == want
        assert crc.crc32c(memoryview(b"xx" + data)[2:]) == want
        cut = size // 3
        assert crc.crc32c(data[cut:], crc.crc32c(data[:cut])) == want


def test_the_c_function_is_loaded_without_the_package() -> None:
    code = ("import sys, kafkactl.record.crc as c; "
            "print(type(c._crc32c).__name__, 'crc32c' in sys.modules, "
            "'importlib.metadata' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["builtin_function_or_method", "False", "False"]
