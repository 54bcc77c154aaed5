"""The `kafkactl` Typer app.

Each subcommand lives in its own module under `kafkactl.cli` and exposes
`register(app)`; this module only wires them together. Subcommand modules parse
options, call the library and render; they hold no protocol or storage logic.

Two rules hold for every command and live here, once: a closed stdout (EPIPE) ends the
command quietly (kafkactl.cli._output), and every error line, ours and the usage errors of
the option parser alike, starts with `error: `.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from kafkactl import __version__
from kafkactl.cli._help import apply_help_rendering
from kafkactl.cli._output import EPIPE_EXIT, flush_stdout, stdout_guard


class KafkactlGroup(TyperGroup):
    """The root command: runs the chosen subcommand under the one EPIPE rule."""

    def invoke(self, ctx: Any) -> Any:
        with stdout_guard():
            return super().invoke(ctx)


apply_help_rendering()

# Subcommand modules, in the order `--help` lists them. Each defines register(app) and
# registers the command named like it (`dump_log` -> `dump-log`); a name here without its
# module fails when the app is built, so a typo cannot drop a command silently.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "serve", "topics", "produce", "consume", "dump_log", "recover", "log_dirs",
    "rebalance", "offsets", "mirror", "configs", "cluster", "top", "acls", "users", "quotas",
    "spark_load", "transactions",
)


def _version_callback(value: bool) -> None:
    if value:
        from kafkactl.record._accel import STATUS  # "compiled kernels: yes" or "no (why)"

        typer.echo(f"kafkactl {__version__}\n{STATUS}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", "-V", help="Print the version and exit.",
        callback=_version_callback, is_eager=True,
    ),
) -> None:
    """Apache Kafka's design in one CLI: a broker (serve), clients and operator tools."""


@functools.cache
def build_app(modules: tuple[str, ...] = SUBCOMMAND_MODULES) -> typer.Typer:
    """The root app with the commands of `modules` (by default every command)."""
    root = typer.Typer(
        name="kafkactl",
        cls=KafkactlGroup,
        help="Apache Kafka's design in one CLI: a broker (serve), clients and operator tools.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    root.callback()(_root)
    # help texts are shown as written (kafkactl.cli._help): scripts/cli_tree.py reads
    # them so too, for the man pages and completions
    root.literal_help = True  # type: ignore[attr-defined]
    for name in modules:
        importlib.import_module(f"kafkactl.cli.{name}").register(root)
    return root


def __getattr__(name: str) -> Any:
    """`app`, the root with every command, is built when first asked for (PEP 562)."""
    if name == "app":
        return build_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def app_for(args: Sequence[str]) -> typer.Typer:
    """The app to run `args` with: only the named command's module when the first argument
    names a command (its start-up then imports and builds none of the other thirteen,
    ~40 ms of a short command's ~150), every command otherwise (--help, --version, a typo)."""
    module = args[0].replace("-", "_") if args and not args[0].startswith("-") else ""
    return build_app((module,)) if module in SUBCOMMAND_MODULES else build_app()


# click's ClickException (the base of every usage error) as Typer ships it: Typer 0.12+
# re-exports click, newer Typers vendor it; BadParameter derives from it either way.
CLICK_EXCEPTION: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def _show_usage_error(e: Any) -> None:
    """A usage error as click prints it (usage, hint), with our `error: ` line."""
    ctx = getattr(e, "ctx", None)
    if ctx is not None:
        hint = ""
        if ctx.command.get_help_option(ctx) is not None:
            hint = f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.\n"
        typer.echo(f"{ctx.get_usage()}\n{hint}", err=True)
    typer.echo(f"error: {e.format_message()}", err=True)


def run(args: Sequence[str] | None = None) -> int:
    """Run kafkactl with `args` (default: sys.argv[1:]); returns the exit status."""
    argv = list(sys.argv[1:] if args is None else args)
    try:
        code = app_for(argv)(args=argv, prog_name="kafkactl", standalone_mode=False)
    except CLICK_EXCEPTION as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # as Typer tells it: by name
            code = 2  # the help is printed already
        else:
            _show_usage_error(e)
            code = int(getattr(e, "exit_code", 2))
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        code = 1
    code = code if isinstance(code, int) else 0
    if not flush_stdout() and code == 0:  # output still buffered met a closed pipe
        code = EPIPE_EXIT
    return code


def main() -> None:
    sys.exit(run())
