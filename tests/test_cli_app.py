import subprocess
import sys

from kafkactl import __version__


def test_version_matches_package() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kafkactl", "--version"], capture_output=True, text=True, check=True
    ).stdout
    lines = out.splitlines()
    assert lines[0] == f"kafkactl {__version__}"
    assert lines[1].startswith("compiled kernels: ")  # yes, or no (and why)


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
