"""A small Typer app shaped like kafkactl's, to exercise the generators on every feature
(choices, paths, repeatable options, --x/--no-x flags, nested groups, roff-hostile help
texts) whatever subcommands the real app has at the moment."""

from __future__ import annotations

import enum
from pathlib import Path

import typer

app = typer.Typer(
    name="kafkactl",
    help="Sample root help.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Codec(enum.StrEnum):
    none = "none"
    gzip = "gzip"
    zstd = "zstd"


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", "-V", help="Print the version and exit."),
) -> None:
    """Sample root help."""


@app.command("produce")
def produce(
    topic: str = typer.Option(..., "-t", "--topic", help="Topic to write [bold]to[/bold]."),
    compression: Codec = typer.Option(Codec.none, "--compression", help="Codec for batches."),
    header: list[str] = typer.Option([], "--header", help="A k=v header; repeatable."),
    file: Path = typer.Option(None, "--file", help="Read records from FILE, not stdin."),
    sync: bool = typer.Option(False, "--sync/--no-sync", help="Wait for each ack."),
    key_separator: str = typer.Option("", "--key-separator", help='Split "key<SEP>value".'),
) -> None:
    """Send records read from stdin.

    .dots at the start of a line, back\\slashes and 'quotes' must survive roff.

    \b
    kafkactl produce -t events < lines.txt
    kafkactl produce -t events --compression zstd
    """


@app.command("dump-log")
def dump_log(
    files: list[Path] = typer.Argument(..., help="Segment files (.log, .index, .timeindex)."),
    deep_iteration: bool = typer.Option(False, "--deep-iteration", help="One line per record."),
) -> None:
    """Print the batches of log segments."""


topics = typer.Typer(help="Create, list and delete topics.")


@topics.command("create")
def create(
    name: str = typer.Argument(..., help="Topic name."),
    partitions: int = typer.Option(1, "--partitions", "-p", help="Partition count."),
) -> None:
    """Create a topic."""


@topics.command("list")
def list_topics() -> None:
    """List topics."""


app.add_typer(topics, name="topics")
