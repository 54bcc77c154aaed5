"""Man pages: committed pages match the app, and groff renders them without warnings."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import cli_tree
import gen_man
import pytest

from tests.distribution import sample_app

REPO = Path(__file__).resolve().parents[2]
MAN_DIR = REPO / "man"


def render(page: Path) -> tuple[str, str]:
    """(text, warnings) of a page as `man -l` shows it (groff -man if man is missing)."""
    env = {**os.environ, "MANWIDTH": "80", "LC_ALL": "C.UTF-8"}
    if shutil.which("man"):
        args = ["man", "--warnings=w", "-l", str(page)]
    elif shutil.which("groff"):
        args = ["groff", "-man", "-Tutf8", "-ww", "-P-cbou", str(page)]
    else:
        pytest.skip("neither man nor groff is installed")
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr


def test_committed_man_pages_are_current() -> None:
    proc = subprocess.run(
        [sys.executable, "scripts/gen_man.py", "--check"], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, (
        f"{proc.stdout}{proc.stderr}\nRegenerate: python scripts/gen_completions.py "
        "&& python scripts/gen_man.py"
    )


def test_one_page_per_subcommand() -> None:
    tree = cli_tree.command_tree()
    expected = {"kafkactl.1"} | {f"kafkactl-{s.path[0]}.1" for s in tree.subcommands}
    assert {p.name for p in MAN_DIR.glob("*.1")} == expected


@pytest.mark.parametrize("page", sorted(MAN_DIR.glob("*.1")), ids=lambda p: p.name)
def test_committed_page_renders_without_warnings(page: Path) -> None:
    text, warnings = render(page)
    assert warnings == ""
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS"):
        assert f"\n{section}\n" in text


def test_generated_roff_survives_hostile_help_text(tmp_path: Path) -> None:
    pages = gen_man.render(cli_tree.command_tree(sample_app.app), tmp_path, "9.9.9")
    assert {p.name for p in pages} == {
        "kafkactl.1", "kafkactl-produce.1", "kafkactl-dump-log.1", "kafkactl-topics.1",
    }
    for path, roff in pages.items():
        path.write_text(roff)
    for path in pages:
        text, warnings = render(path)
        assert warnings == "", f"{path.name}: {warnings}"
    produce, _ = render(tmp_path / "kafkactl-produce.1")
    prose = " ".join(produce.split())  # groff justifies lines with extra spaces
    assert "kafkactl-produce - Send records read from stdin." in prose
    assert ".dots at the start of a line, back\\slashes and 'quotes' must survive roff." in prose
    # a \b block keeps its line breaks
    assert "kafkactl produce -t events < lines.txt\n" in produce
    assert "Topic to write to." in produce  # rich markup removed
    assert "--compression none|gzip|zstd" in produce
    assert "[default: none]" in produce
    assert "--sync, --no-sync" in produce
    topics, _ = render(tmp_path / "kafkactl-topics.1")
    assert "kafkactl topics create [OPTIONS] NAME" in topics
    assert "-p, --partitions PARTITIONS" in topics
    root, _ = render(tmp_path / "kafkactl.1")
    assert "kafkactl-dump-log(1)" in root
    assert "kafkactl 9.9.9" in root


def test_check_removes_and_reports_pages_of_vanished_subcommands(tmp_path: Path) -> None:
    (tmp_path / "kafkactl-gone.1").write_text(".TH GONE 1\n")
    assert gen_man.main(["--out", str(tmp_path)]) == 0
    assert not (tmp_path / "kafkactl-gone.1").exists()
    assert gen_man.main(["--check", "--out", str(tmp_path)]) == 0
