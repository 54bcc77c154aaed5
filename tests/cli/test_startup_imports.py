"""What a kafkactl process imports: a command that prints no rich output imports no rich
(Typer's rich help module, rich.console, markdown_it, pygments: ~120 ms of a start-up that
every `kafkactl produce`/`consume` pays); `--help` imports rich but not rich.markdown or
rich.traceback (kafkactl.cli._help), and prints the same help.

Each run is a fresh interpreter (`python -m kafkactl` as a user starts it), not a fork of
the tests' zygote, which has imported more than a command needs."""

from __future__ import annotations

import inspect
import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from tests.conftest import BrokerProcess

# runs `python -m kafkactl ARGS...` and writes the imported module names to $MODULES_OUT
_RUN_AND_LIST_MODULES = """
import atexit, json, os, runpy, sys
atexit.register(lambda: json.dump(sorted(sys.modules), open(os.environ["MODULES_OUT"], "w")))
sys.argv = ["kafkactl", *sys.argv[1:]]
runpy.run_module("kafkactl", run_name="__main__", alter_sys=True)
"""

RICH_HELP = ("typer.rich_utils", "rich", "rich.console", "rich.markdown", "markdown_it",
             "pygments", "rich.traceback")
# what an uncompressed, unauthenticated produce/consume never needs (record.codecs and
# client.security import them when first used; client.connection imports ssl for TLS, and
# gives an ASCII host name to getaddrinfo as bytes, which needs no idna codec)
UNUSED_LIBRARIES = ("snappy", "lz4.frame", "zstandard", "gzip", "kafkactl.protocol.scram",
                    "ssl", "encodings.idna")
# nor a produce that is not transactional and logs nothing
PRODUCE_UNUSED = ("logging", "kafkactl.client.transaction_manager")


def kafkactl_modules(tmp_path: Path, args: list[str], stdin: bytes = b""
                     ) -> tuple[subprocess.CompletedProcess[bytes], set[str]]:
    out = tmp_path / "modules.json"
    r = subprocess.run([sys.executable, "-c", _RUN_AND_LIST_MODULES, *args], input=stdin,
                       capture_output=True, timeout=120,
                       env={**os.environ, "MODULES_OUT": str(out), "COLUMNS": "80"})
    return r, set(json.loads(out.read_text()))


def test_produce_and_consume_import_no_rich(module_broker: BrokerProcess,
                                            tmp_path: Path) -> None:
    bootstrap = module_broker.bootstrap
    r, modules = kafkactl_modules(tmp_path, ["produce", "-b", bootstrap, "-t", "startup"],
                                  b"one\ntwo\n")
    assert r.returncode == 0, r.stderr
    assert b"2 of 2 records acknowledged" in r.stderr
    assert "kafkactl.client.producer" in modules  # it did produce, in this process
    assert not set(RICH_HELP) & modules, sorted(set(RICH_HELP) & modules)
    assert not set(UNUSED_LIBRARIES) & modules, sorted(set(UNUSED_LIBRARIES) & modules)
    assert not set(PRODUCE_UNUSED) & modules, sorted(set(PRODUCE_UNUSED) & modules)

    r, modules = kafkactl_modules(
        tmp_path, ["consume", "-b", bootstrap, "-t", "startup", "-o", "beginning", "-e"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"one\ntwo\n"
    assert not set(RICH_HELP) & modules, sorted(set(RICH_HELP) & modules)
    assert not set(UNUSED_LIBRARIES) & modules, sorted(set(UNUSED_LIBRARIES) & modules)


@pytest.mark.parametrize("args", [["--help"], ["produce", "--help"]], ids=" ".join)
def test_help_imports_no_markdown_or_traceback_rendering(tmp_path: Path,
                                                         args: list[str]) -> None:
    r, modules = kafkactl_modules(tmp_path, args)
    assert r.returncode == 0, r.stderr
    assert b"Usage: kafkactl" in r.stdout and b"--help" in r.stdout
    assert {"typer.rich_utils", "rich.console", "rich.table"} <= modules
    unused = {"rich.markdown", "markdown_it", "pygments", "rich.syntax", "rich.traceback"}
    assert not unused & modules, sorted(unused & modules)


def test_markdown_help_and_rich_markdown_still_work_after_kafkactl_help() -> None:
    """The stand-ins for rich.markdown/rich.traceback live only while typer.rich_utils
    imports: a Typer app in markdown mode, rendered in the same process after kafkactl's
    help, gets rich's real Markdown, and `import rich.markdown` is the real module."""
    from kafkactl.cli import app as cli
    from kafkactl.cli._help import load_help_rendering

    with redirect_stdout(io.StringIO()) as shown:
        assert cli.run(["produce", "--help"]) == 0
    assert "--topic" in shown.getvalue()
    load_help_rendering()

    md = typer.Typer(rich_markup_mode="markdown", add_completion=False)

    @md.command()
    def hello() -> None:
        """Says **hello**.

        * one item
        """

    result = CliRunner().invoke(md, ["--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "Says hello." in result.output and "**" not in result.output
    assert "• one item" in result.output  # rendered by rich's Markdown, not as text

    import rich.markdown
    from typer import rich_utils

    assert hasattr(rich.markdown, "MarkdownContext")  # the real module, not a stand-in
    assert isinstance(rich_utils.Markdown("x"), rich.markdown.Markdown)


def _summaries(group: Any) -> list[tuple[str, str, bool, bool]]:
    """What the root's help shows of each command: name and first paragraph of its help."""
    return [(name, inspect.cleandoc(c.short_help or c.help or "").split("\n\n")[0],
             c.hidden, c.deprecated) for name, c in group.commands.items()]


def test_the_root_help_lists_the_commands_as_built() -> None:
    """`kafkactl --help` lists COMMAND_SUMMARIES without building the commands: the list
    (names, order, summaries) is the built commands'. Changed a command's first help
    paragraph, or added one? Update COMMAND_SUMMARIES in kafkactl/cli/app.py."""
    from kafkactl.cli import app as cli

    built = typer.main.get_command(cli.build_app())
    listed = typer.main.get_command(cli.listing_app())
    assert _summaries(listed) == _summaries(built)
    assert {m.replace("_", "-") for m in cli.SUBCOMMAND_MODULES} == set(cli.COMMAND_SUMMARIES)


@pytest.mark.parametrize("columns", [40, 80, 123, 250])
def test_the_root_help_from_the_summaries_is_byte_for_byte_the_built_one(columns: int) -> None:
    from kafkactl.cli import app as cli

    env = {"COLUMNS": str(columns), "TERMINAL_WIDTH": None}
    shown = [CliRunner().invoke(app, ["--help"], env=env)
             for app in (cli.build_app(), cli.listing_app())]
    assert [r.exit_code for r in shown] == [0, 0], [r.output for r in shown]
    assert "transactions" in shown[0].output
    assert shown[1].output == shown[0].output


def test_no_command_arguments_use_the_listing_app(tmp_path: Path) -> None:
    """`kafkactl`, `kafkactl --help`, `kafkactl -V`: no command module imported."""
    for args in ([], ["--help"], ["-h"], ["-V"]):
        r, modules = kafkactl_modules(tmp_path, args)
        assert r.returncode in (0, 2), r.stderr  # no arguments: the help, exit status 2
        assert b"kafkactl" in r.stdout + r.stderr
        commands = {f"kafkactl.cli.{m}" for m in ("serve", "produce", "topics", "spark_load")}
        assert not commands & modules, sorted(commands & modules)
