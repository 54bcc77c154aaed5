"""The `kafkactl` Typer app.

Each subcommand lives in its own module under `kafkactl.cli` and exposes
`register(app)`; this module only wires them together. Subcommand modules parse
options, call the library and render; they hold no protocol or storage logic.

Two rules hold for every command and live here, once: a closed stdout (EPIPE) ends the
command quietly, another failed write to stdout with one error line and exit status 1
(kafkactl.cli._output), and every error line, ours and the usage errors of the option
parser alike, starts with `error: `.
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
from kafkactl.cli._output import finish_stdout, reserve_standard_streams, stdout_guard


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
    "serve", "topics", "produce", "consume", "delete_records", "dump_log", "recover",
    "log_dirs",
    "rebalance", "offsets", "mirror", "configs", "cluster", "top", "acls", "users", "quotas",
    "spark_load", "transactions",
)

# What `kafkactl --help` lists (the first paragraph of each command's help, in the order
# the help shows them: commands, then command groups), so that the root help, which runs no
# command, imports and builds none of the modules above (~55 ms of its ~200).
# tests/cli/test_startup_imports.py checks that it renders exactly as the built commands do.
COMMAND_SUMMARIES: dict[str, str] = {
    "serve": "Run a Kafka broker in the foreground (Ctrl-C or SIGTERM stops it cleanly).",
    "produce": "Produce records read from stdin (or --file), one per line by default.",
    "consume": "Print records of the given topics to stdout (value per line by default).",
    "delete-records": "Delete the records of partitions below an offset"
                      " (kafka-delete-records).",
    "dump-log": "Dump log segments and indexes like Kafka's DumpLogSegments.",
    "recover": "Validate and repair log segments offline: cut torn or corrupt tails, rebuild"
               " indexes.",
    "rebalance": "Members, their current assignment and the range assignment for the group;"
                 " or, with\n--partitions / --preferred-leaders, replicas and leaders over"
                 " the brokers.",
    "mirror": "Copy topics from a source cluster into a target cluster as a consumer group,\n"
              "committing source offsets only for records the target acknowledged.",
    "top": "A live view of a broker or cluster: brokers, topic rates, unhealthy partitions"
           " and\nconsumer lag (Ctrl-C quits). A broker's CPU comes from its metrics endpoint"
           " (serve\n--metrics): give --metrics, or --metrics-port / --broker-metrics with"
           " the protocol.",
    "spark-load": "Load topics into Parquet with Spark, one task per topic-partition range.",
    "topics": "Create, list, describe, alter and delete topics; offsets at a time.",
    "log-dirs": "Describe brokers' log dirs and move replicas between the log dirs of a"
                " broker.",
    "offsets": "List groups; show, reset, delete and migrate consumer-group offsets.",
    "configs": "Describe and alter topic and broker configs (kafka-configs).",
    "cluster": "Describe the cluster (controller, brokers, offline and under-replicated"
               " partitions) and verify replicas.",
    "acls": "Add, list and remove ACLs (kafka-acls).",
    "users": "Add, list and delete SCRAM users.",
    "quotas": "Add, list and remove client quotas (producer_byte_rate, consumer_byte_rate,"
              " request_percentage, controller_mutation_rate) per user, client id, or both;"
              " and connection_creation_rate per IP address.",
    "transactions": "List, describe, find hanging and abort transactions"
                    " (kafka-transactions).",
}

# arguments that run no command: the root's help and version
_NO_COMMAND_ARGS = frozenset({"-h", "--help", "-V", "--version"})


def _version_callback(value: bool) -> None:
    if value:
        from kafkactl.log.kernels import STATUS  # "compiled kernels: yes", "no (why)", "partly"

        typer.echo(f"kafkactl {__version__}\n{STATUS}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", "-V", help="Print the version and exit.",
        callback=_version_callback, is_eager=True,
    ),
) -> None:
    """Apache Kafka's design in one CLI: a broker (serve), clients and operator tools."""


def _root_app() -> typer.Typer:
    """The root app, without commands."""
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
    return root


@functools.cache
def build_app(modules: tuple[str, ...] = SUBCOMMAND_MODULES) -> typer.Typer:
    """The root app with the commands of `modules` (by default every command)."""
    root = _root_app()
    for name in modules:
        importlib.import_module(f"kafkactl.cli.{name}").register(root)
    return root


def _listed_only() -> None:
    raise RuntimeError("a command of the listing app ran: app_for() chose wrongly")


@functools.cache
def listing_app() -> typer.Typer:
    """The root app as `kafkactl --help` shows it: every command by its name and summary
    (COMMAND_SUMMARIES), none of them built; for argument lists that run no command."""
    root = _root_app()
    for name, summary in COMMAND_SUMMARIES.items():
        root.command(name=name, help=summary)(_listed_only)
    return root


def __getattr__(name: str) -> Any:
    """`app`, the root with every command, is built when first asked for (PEP 562)."""
    if name == "app":
        return build_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def app_for(args: Sequence[str]) -> typer.Typer:
    """The app to run `args` with: only the named command's module when the first argument
    names a command (its start-up then imports and builds none of the others, ~40 ms of a
    short command's ~150); the listing app when `args` run no command (none, --help,
    --version); every command otherwise (a typo: the error names the commands)."""
    if set(args) <= _NO_COMMAND_ARGS:
        return listing_app()
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
    reserve_standard_streams()  # before anything opens a file or socket
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
    return finish_stdout(code)  # output still buffered may meet a closed pipe, a full disk


def main() -> None:
    sys.exit(run())
