"""`--help` of every command and subcommand, found by walking the live CLI tree, run as a
real process: it must exit 0 without a traceback, and at 80 columns (a piped `--help`, an
80-column terminal) every spelling of every option must appear whole, with no line wider
than the terminal and nothing cut to an ellipsis."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import zygote

REPO = Path(__file__).resolve().parents[2]


def _cli_tree() -> Any:
    spec = importlib.util.spec_from_file_location("cli_tree", REPO / "scripts" / "cli_tree.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("cli_tree", module)
    spec.loader.exec_module(module)
    return module


TREE = _cli_tree().command_tree()
COMMANDS = TREE.walk()


def _help(path: tuple[str, ...], columns: int) -> tuple[int, str, str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    env.pop("TERMINAL_WIDTH", None)
    r = zygote.run([*path, "--help"], text=True, timeout=120, env=env)
    return r.returncode, r.stdout, r.stderr


def _whole(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", text) is not None


def test_the_tree_has_every_command() -> None:
    names = {c.name for c in COMMANDS}
    assert {"kafkactl", "kafkactl users add", "kafkactl mirror", "kafkactl offsets migrate",
            "kafkactl spark-load", "kafkactl rebalance"} <= names, names


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_help_at_80_columns_runs_and_shows_every_option_whole(command: Any) -> None:
    code, out, err = _help(command.path, 80)
    assert code == 0, (code, out, err)
    assert "Traceback" not in out + err, err
    assert err == "", err
    assert "Usage: kafkactl" in out, out
    too_wide = [line for line in out.splitlines() if len(line) > 80]
    assert not too_wide, "\n".join(too_wide)
    assert "…" not in out, out
    for option in command.options:
        for name in (*option.names, *option.secondary):
            assert _whole(name, out), f"{command.name}: {name} not whole in\n{out}"


def test_help_texts_are_literal_not_markup() -> None:
    """`[/chroot]` crashed rich's markup parser; `[v1,v2]` vanished as a tag."""
    code, out, err = _help(("users", "add"), 200)
    assert code == 0 and "Traceback" not in err, err
    assert "(HOST:PORT[/chroot])" in out, out
    code, out, err = _help(("configs", "alter"), 200)
    assert code == 0, err
    assert "'k1=v1,k2=[v1,v2],k3=v3'" in out, out


def test_a_negative_flag_sits_under_its_positive_one() -> None:
    code, out, _err = _help(("mirror",), 80)
    assert code == 0
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "--abort-on-send-failure" in line)
    assert "--no-abort-on-send-failure" in lines[at + 1], out
