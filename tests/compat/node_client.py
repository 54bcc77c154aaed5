"""Run the small kafkajs scripts in tests/compat/node/ (kafkajs is installed there by
scripts/install_test_clients.sh). Without node or kafkajs the calling test skips, with the
reason, also given as a warning so that the run's warnings summary prints it."""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parent / "node"


def kafkajs_missing() -> str | None:
    """Why the kafkajs tests cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed (Debian: nodejs)"
    if not (NODE_DIR / "node_modules" / "kafkajs" / "package.json").exists():
        return "kafkajs is not installed: run scripts/install_test_clients.sh"
    return None


def kafkajs_version() -> str | None:
    pkg = NODE_DIR / "node_modules" / "kafkajs" / "package.json"
    try:
        return str(json.loads(pkg.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def run_node(script: str, *args: str, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Run tests/compat/node/SCRIPT with ARGS; return the JSON lines it printed."""
    reason = kafkajs_missing()
    if reason:
        warnings.warn(f"kafkajs tests skipped: {reason}", stacklevel=2)
        pytest.skip(reason)
    proc = subprocess.run(["node", str(NODE_DIR / script), *args], cwd=NODE_DIR,
                          capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, (
        f"{script} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return lines
