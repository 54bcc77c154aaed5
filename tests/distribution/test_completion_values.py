"""Completion of kafkactl's own app (rendered into a temporary directory, as
gen_completions.py would write it): options whose values are a fixed set complete them
(they are plain strings the commands check, so their values come from VALUE_CHOICES),
and bash keeps a file name with spaces one word. The man pages say which environment
variables a command reads."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import cli_tree
import gen_completions
import gen_man
import pytest

CHECKS = {
    ("produce", "-z"): ["none", "gzip", "snappy", "lz4", "zstd"],
    ("produce", "--compression"): ["none", "gzip", "snappy", "lz4", "zstd"],
    ("produce", "--acks"): ["0", "1", "all"],
    ("produce", "--partitioner"): ["murmur2", "crc32", "consistent_random", "fnv1a",
                                   "fnv1a_random", "random", "roundrobin"],
    ("consume", "--isolation-level"): ["read_uncommitted", "read_committed"],
    ("consume", "-o"): ["earliest", "latest"],
    ("serve", "--log-level"): ["debug", "info", "warning", "error"],
    ("topics", "offsets", "--time"): ["earliest", "latest", "max-timestamp"],
    ("users", "add", "--mechanism"): ["SCRAM-SHA-256", "SCRAM-SHA-512"],
}

# options whose help does not list their values (`users add --mechanism`'s does)
HELP_NAMES_NONE = {(("users", "delete"), "--mechanism")}


@pytest.fixture(scope="module")
def tree() -> cli_tree.CommandSpec:
    return gen_completions.with_value_choices(cli_tree.command_tree(),
                                              gen_completions.value_choices())


@pytest.fixture(scope="module")
def scripts(tree: cli_tree.CommandSpec, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("completions")
    for path, text in gen_completions.render(tree, out).items():
        path.write_text(text)
    return {s: out / f"kafkactl.{s}" for s in ("bash", "zsh", "fish")}


def bash_complete(script: Path, *words: str, cwd: Path | None = None) -> list[str]:
    driver = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 '
              ')); _kafkactl; printf "%s\\n" "${COMPREPLY[@]}"')
    out = subprocess.run(["bash", "-c", driver, "complete", str(script), *words],
                         capture_output=True, text=True, check=True, cwd=cwd).stdout
    return [line for line in out.splitlines() if line]


def test_every_value_choice_names_an_option_of_the_app(tree: cli_tree.CommandSpec) -> None:
    options = {(c.path, o.names[-1]): o for c in tree.walk() for o in c.options}
    for key, values in gen_completions.value_choices().items():
        assert key in options, f"{key}: no such option (renamed? update VALUE_CHOICES)"
        opt = options[key]
        assert opt.takes_value and opt.choices == values
        # the values the help text names: the table and the command have not drifted
        shown = f"{opt.help} {opt.metavar}".lower()
        assert key in HELP_NAMES_NONE or all(v.lower() in shown for v in values), (
            key, values, opt.help)


@pytest.mark.parametrize("words", list(CHECKS))
def test_bash_completes_the_values(scripts: dict[str, Path], words: tuple[str, ...]) -> None:
    assert bash_complete(scripts["bash"], "kafkactl", *words, "") == CHECKS[words]


def test_bash_keeps_a_file_name_with_spaces_whole(scripts: dict[str, Path],
                                                  tmp_path: Path) -> None:
    (tmp_path / "sp dir").mkdir()
    (tmp_path / "sp dir" / "my file.txt").write_text("")
    (tmp_path / "my records.txt").write_text("")
    assert bash_complete(scripts["bash"], "kafkactl", "produce", "--file", "my",
                         cwd=tmp_path) == ["my records.txt"]
    assert bash_complete(scripts["bash"], "kafkactl", "produce", "--file", "sp dir/m",
                         cwd=tmp_path) == ["sp dir/my file.txt"]
    assert bash_complete(scripts["bash"], "kafkactl", "dump-log", "sp",
                         cwd=tmp_path) == ["sp dir"]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_the_values(scripts: dict[str, Path]) -> None:
    out = subprocess.run(["fish", "--no-config", "-c",
                          f"source {scripts['fish']}; complete -C 'kafkactl produce --acks '"],
                         capture_output=True, text=True, check=True).stdout
    assert sorted(row.split("\t")[0] for row in out.splitlines()) == ["0", "1", "all"]


@pytest.mark.parametrize(("shell", "args"), [("zsh", ["zsh", "-n"]),
                                             ("fish", ["fish", "--no-execute"])])
def test_the_scripts_parse(scripts: dict[str, Path], shell: str, args: list[str]) -> None:
    if shutil.which(args[0]) is None:
        pytest.skip(f"{shell} is not installed")
    proc = subprocess.run([*args, str(scripts[shell])], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_man_pages_name_the_environment(tmp_path: Path) -> None:
    from kafkactl import __version__

    pages = gen_man.render(cli_tree.command_tree(), tmp_path, __version__,
                           gen_man.environment())

    def environment(name: str) -> str:
        text = pages[tmp_path / f"{name}.1"]
        return text.split(".SH ENVIRONMENT\n", 1)[1].split(".SH ", 1)[0] \
            if ".SH ENVIRONMENT" in text else ""

    for name in ("kafkactl-consume", "kafkactl-produce", "kafkactl-topics", "kafkactl"):
        assert "\\fBKAFKACTL_BOOTSTRAP\\fR" in environment(name), name
        assert "bootstrap.servers of a \\-\\-command\\-config file" in environment(name)
    assert "KAFKACTL_LOG_FORMAT" in environment("kafkactl-serve")
    for name in ("kafkactl-mirror", "kafkactl-dump-log", "kafkactl-recover"):
        assert environment(name) == "", name
    for path in pages:
        path.write_text(pages[path])
        proc = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(path)],
                              capture_output=True, text=True)
        assert proc.returncode == 0 and proc.stderr == "", (path, proc.stderr)
