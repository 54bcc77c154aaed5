"""The compiled kernels build warning-free with -Wall -Wextra (issue 33: they read untrusted
bytes from the network, and a compiler warning there is a bug until shown otherwise).

The C files are the ones the install generated from the `.pyx` sources (setup.py's
cythonize writes them beside the sources); each is compiled again here, with the build's
own include directory, at -Og (the optimizer's flow analysis that warnings like
maybe-uninitialized need, at a third of -O2's compile time: the suite shares two cores) and
-Werror.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from kafkactl.log import kernels as log_kernels
from kafkactl.protocol import kernels as protocol_kernels
from kafkactl.record import _accel

REPO = Path(__file__).resolve().parents[2]
SOURCES = ["kafkactl/record/_kernels.c", "kafkactl/protocol/_codec_kernels.c",
           "kafkactl/log/_log_kernels.c"]
FLAGS = ["-Og", "-Wall", "-Wextra", "-Werror", "-fPIC"]
GCC = shutil.which("gcc")

needs_gcc = pytest.mark.skipif(GCC is None, reason="no gcc on this machine")


def _compile(source: Path) -> subprocess.CompletedProcess[str]:
    assert GCC is not None
    include = sysconfig.get_paths()["include"]
    return subprocess.run([GCC, *FLAGS, f"-I{include}", "-c", str(source), "-o", "/dev/null"],
                          capture_output=True, text=True, timeout=300)


@needs_gcc
@pytest.mark.parametrize("name", SOURCES)
def test_kernel_compiles_without_warnings(name: str) -> None:
    if (_accel.kernels is None or protocol_kernels.codec_kernels is None
            or log_kernels.log_kernels is None):
        pytest.skip("the compiled kernels are not in use here (KAFKACTL_NO_EXTENSIONS or no "
                    "build): nothing was generated to check")
    source = REPO / name
    assert source.is_file(), f"{name} is missing although its module is built"
    result = _compile(source)
    assert result.returncode == 0, f"{name} has compiler warnings:\n{result.stderr[-4000:]}"


@needs_gcc
def test_the_flags_turn_a_warning_into_a_failure(tmp_path: Path) -> None:
    """The check above can fail: an unused variable under the same flags is an error."""
    source = tmp_path / "unused.c"
    source.write_text("int f(void) { int unused = 1; return 0; }\n")
    result = _compile(source)
    assert result.returncode != 0
    assert "unused" in result.stderr
