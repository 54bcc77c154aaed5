"""Shell completion scripts: committed files match the app, and they really complete."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import cli_tree
import gen_completions
import pytest

from tests.distribution import sample_app

REPO = Path(__file__).resolve().parents[2]
BASH = REPO / "completions" / "kafkactl.bash"


def _bash_complete(script: Path, *words: str) -> list[str]:
    """Run the completion function the way bash does on TAB after `words`."""
    driver = (
        'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); '
        '_kafkactl; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    out = subprocess.run(
        ["bash", "-c", driver, "complete", str(script), *words],
        capture_output=True, text=True, check=True,
    ).stdout
    return [line for line in out.splitlines() if line]


@pytest.fixture(scope="module")
def sample_scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("completions")
    rendered = gen_completions.render(cli_tree.command_tree(sample_app.app), out)
    for path, text in rendered.items():
        path.write_text(text)
    return {path.suffix.lstrip("."): path for path in rendered}


def test_committed_completions_are_current() -> None:
    proc = subprocess.run(
        [sys.executable, "scripts/gen_completions.py", "--check"],
        cwd=REPO, capture_output=True, text=True,
    )
    assert proc.returncode == 0, (
        f"{proc.stdout}{proc.stderr}\nRegenerate: python scripts/gen_completions.py "
        "&& python scripts/gen_man.py"
    )


def test_check_reports_a_stale_file(tmp_path: Path) -> None:
    rendered = gen_completions.render(cli_tree.command_tree(sample_app.app), tmp_path)
    assert cli_tree.write_outputs(rendered, check=False) == 0
    assert cli_tree.write_outputs(rendered, check=True) == 0
    bash = tmp_path / "kafkactl.bash"
    bash.write_text(bash.read_text().replace("dump-log", "dump-logs"))
    assert cli_tree.write_outputs(rendered, check=True) == 1


def test_committed_bash_script_registers_and_lists_every_subcommand() -> None:
    registered = subprocess.run(
        ["bash", "-c", f'source "{BASH}" && complete -p kafkactl'],
        capture_output=True, text=True, check=True,
    ).stdout
    assert registered.strip() == "complete -F _kafkactl kafkactl"
    tree = cli_tree.command_tree()
    assert _bash_complete(BASH, "kafkactl", "") == [s.path[-1] for s in tree.subcommands]
    assert "--version" in _bash_complete(BASH, "kafkactl", "--")


def test_bash_completes_subcommands_options_and_values(
    sample_scripts: dict[str, Path], tmp_path: Path
) -> None:
    bash = sample_scripts["bash"]
    assert _bash_complete(bash, "kafkactl", "") == ["produce", "dump-log", "topics"]
    assert _bash_complete(bash, "kafkactl", "pr") == ["produce"]
    assert _bash_complete(bash, "kafkactl", "produce", "--c") == ["--compression"]
    assert _bash_complete(bash, "kafkactl", "produce", "--compression", "") == [
        "none", "gzip", "zstd",
    ]
    # --opt=value: bash splits it into "--opt", "=", "value"
    assert _bash_complete(bash, "kafkactl", "produce", "--compression", "=", "z") == ["zstd"]
    # a free-form value gets no suggestions, and the value is skipped when walking
    assert _bash_complete(bash, "kafkactl", "produce", "-t", "") == []
    assert _bash_complete(bash, "kafkactl", "produce", "-t", "topics", "--s") == [
        "--sync",
    ]
    assert _bash_complete(bash, "kafkactl", "topics", "") == ["create", "list"]
    assert set(_bash_complete(bash, "kafkactl", "topics", "create", "-")) == {
        "-p", "--partitions", "-h", "--help",
    }
    (tmp_path / "segment.log").write_bytes(b"")
    assert _bash_complete(bash, "kafkactl", "produce", "--file", str(tmp_path / "seg")) == [
        str(tmp_path / "segment.log"),
    ]
    assert _bash_complete(bash, "kafkactl", "dump-log", str(tmp_path / "seg")) == [
        str(tmp_path / "segment.log"),
    ]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_subcommands_and_choices(sample_scripts: dict[str, Path]) -> None:
    def complete(line: str) -> list[str]:
        out = subprocess.run(
            ["fish", "--no-config", "-c", f"source {sample_scripts['fish']}; complete -C '{line}'"],
            capture_output=True, text=True, check=True,
        ).stdout
        return sorted(row.split("\t")[0] for row in out.splitlines())

    assert complete("kafkactl ") == ["dump-log", "produce", "topics"]
    assert complete("kafkactl produce --compression ") == ["gzip", "none", "zstd"]
    assert complete("kafkactl topics ") == ["create", "list"]
    assert "--partitions" in complete("kafkactl topics create --")


@pytest.mark.parametrize(
    ("shell", "args"), [("zsh", ["zsh", "-n"]), ("fish", ["fish", "--no-execute"])]
)
def test_committed_scripts_parse(shell: str, args: list[str]) -> None:
    if shutil.which(args[0]) is None:
        pytest.skip(f"{shell} is not installed")
    for script in (REPO / "completions" / f"kafkactl.{shell}",):
        proc = subprocess.run([*args, str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
