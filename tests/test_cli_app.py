import os
import subprocess
import sys

import pytest

from kafkactl import __version__
from kafkactl.record import _accel


def test_version_matches_package() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kafkactl", "--version"], capture_output=True, text=True, check=True
    ).stdout
    lines = out.splitlines()
    assert lines[0] == f"kafkactl {__version__}"
    assert lines[1].startswith("compiled kernels: ")  # yes, or no (and why)


def _status_without(*modules: str) -> str:
    """What --version would say were `modules` not built (imports of them fail)."""
    code = ("import sys\n"
            + "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
            + "from kafkactl.log.kernels import STATUS\nprint(STATUS)\n")
    env = {k: v for k, v in os.environ.items() if k != "KAFKACTL_NO_EXTENSIONS"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.mark.skipif(_accel.kernels is None, reason=f"pure Python: {_accel.REASON}")
def test_version_names_each_kernel_module_not_in_use() -> None:
    """--version covers every kernel module (record, protocol, log), not only record's."""
    assert _status_without() == "compiled kernels: yes"
    partly = _status_without("kafkactl.log._log_kernels")
    assert partly.startswith("compiled kernels: partly (log's not in use: the extension is "
                             "not built: "), partly
    assert "record" not in partly and "protocol's" not in partly
    both = _status_without("kafkactl.protocol._codec_kernels", "kafkactl.log._log_kernels")
    assert "protocol's not in use" in both and "log's not in use" in both, both
    none = _status_without("kafkactl.record._kernels", "kafkactl.protocol._codec_kernels",
                           "kafkactl.log._log_kernels")
    assert none.startswith("compiled kernels: no (the extension is not built: "), none


def test_help_lists_usage() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kafkactl", "--help"], capture_output=True, text=True, check=True
    )
    assert "Usage" in proc.stdout


def test_version_matches_installed_distribution() -> None:
    from importlib.metadata import version

    assert version("kafkactl") == __version__


def test_help_does_not_import_the_libraries() -> None:
    """`--help` must stay fast: building the app (every subcommand and its options) loads
    Typer only; the client, log, broker, protocol and record packages load when a command
    runs. A module-level import in a kafkactl/cli module breaks this."""
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['kafkactl', 'produce', '--help']\n"
        "try:\n"
        "    runpy.run_module('kafkactl', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[:2] in (\n"
        "    ['kafkactl', p] for p in ('client', 'log', 'broker', 'protocol', 'record')))\n"
        "print('LOADED', ' '.join(heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    assert "--topic" in proc.stdout  # the help really rendered
    loaded = proc.stdout.rsplit("LOADED", 1)[1].split()
    assert loaded == [], f"--help imported {loaded}"
