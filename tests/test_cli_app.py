import subprocess
import sys

from kafkactl import __version__


def test_version_matches_package() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kafkactl", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == f"kafkactl {__version__}"


def test_help_lists_usage() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kafkactl", "--help"], capture_output=True, text=True, check=True
    )
    assert "Usage" in proc.stdout
