"""The `kafkactl` Typer app.

Each subcommand lives in its own module under `kafkactl.cli` and exposes
`register(app)`; this module only wires them together. Subcommand modules parse
options, call the library and render; they hold no protocol or storage logic.
"""

from __future__ import annotations

import importlib
import importlib.util

import typer

from kafkactl import __version__

app = typer.Typer(
    name="kafkactl",
    help="Apache Kafka's design in one CLI: a broker (serve), clients and operator tools.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Subcommand modules, in the order `--help` lists them. Each defines register(app).
# A module that is not (yet) part of the tree is skipped, so there are no placeholders.
SUBCOMMAND_MODULES: list[str] = [
    "serve", "topics", "produce", "consume", "dump_log", "recover",
    "rebalance", "offsets", "mirror",
    "spark_load",
]


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"kafkactl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", "-V", help="Print the version and exit.",
        callback=_version_callback, is_eager=True,
    ),
) -> None:
    """Apache Kafka's design in one CLI: a broker (serve), clients and operator tools."""


for _name in SUBCOMMAND_MODULES:
    if importlib.util.find_spec(f"kafkactl.cli.{_name}") is not None:
        importlib.import_module(f"kafkactl.cli.{_name}").register(app)


def main() -> None:
    app()
