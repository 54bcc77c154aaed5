"""The kafkactl command tree as plain data, for the completion and man-page generators.

Both generators read the live Typer app (whatever subcommand modules exist when they run)
through `command_tree()`, so their output changes exactly when the app does; the tests in
tests/distribution/ regenerate in memory and compare with the committed files.
"""

from __future__ import annotations

import enum
import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, get_args

import typer
import typer.main

REPO = Path(__file__).resolve().parent.parent
PROG = "kafkactl"

# Typer interprets help texts as rich markup by default: "[bold]x[/bold]" shows as "x".
_MARKUP_TAG = re.compile(r"\[/?[a-z#@][^\[\]]*\]")


@dataclass(frozen=True)
class OptionSpec:
    """One option (or flag) of a command."""

    names: tuple[str, ...]  # every spelling, e.g. ("-t", "--topic")
    secondary: tuple[str, ...]  # the "off" spellings of a --x/--no-x flag
    help: str
    metavar: str  # "" for flags
    takes_value: bool
    choices: tuple[str, ...]
    is_path: bool  # the value names a file or directory
    multiple: bool
    required: bool


@dataclass(frozen=True)
class ArgumentSpec:
    """One positional argument."""

    name: str  # metavar, e.g. "FILE..."
    help: str
    choices: tuple[str, ...]
    is_path: bool
    nargs: int
    required: bool


@dataclass
class CommandSpec:
    """A command or command group; `path` is () for the root, ("topics", "create") deeper."""

    path: tuple[str, ...]
    summary: str
    help: str
    options: list[OptionSpec] = field(default_factory=list)
    arguments: list[ArgumentSpec] = field(default_factory=list)
    subcommands: list[CommandSpec] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " ".join((PROG, *self.path))

    def walk(self) -> list[CommandSpec]:
        """This command and every command below it, depth first, in help order."""
        out = [self]
        for sub in self.subcommands:
            out.extend(sub.walk())
        return out


def plain(text: str | None, markup: bool = True) -> str:
    """Help text as the user sees it: Click's \\b / \\f markers handled, markup removed."""
    if not text:
        return ""
    text = text.split("\f", 1)[0]  # Click: everything after \f is not help
    if markup:
        text = _MARKUP_TAG.sub("", text).replace("\\[", "[")
    return text.strip()


def _names_path(annotation: Any) -> bool:
    """A Path annotation, or a list/Optional/union of one (Typer < 0.29 flags neither
    `Path | None` nor `list[Path]` as a path)."""
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return True
    return any(_names_path(a) for a in get_args(annotation))


def _type_info(param: Any) -> tuple[tuple[str, ...], bool]:
    """(choices, names-a-path) of a parameter, from Typer's type descriptor or Click's type."""
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:  # Typer >= 0.20 (its own parameter classes)
        choices = tuple(str(c.value if isinstance(c, enum.Enum) else c) for c in desc.choices or ())
        return choices, bool(desc.is_path or desc.is_file or _names_path(desc.annotation))
    ptype = getattr(param, "type", None)  # plain Click types (older Typer)
    raw = getattr(ptype, "choices", None) or ()
    choices = tuple(str(c.value if isinstance(c, enum.Enum) else c) for c in raw)
    kinds = {c.__name__ for c in type(ptype).__mro__}  # Click's Path/File (or Typer's own)
    return choices, bool(kinds & {"Path", "File", "TyperPath"})


def _ordered(names: list[str]) -> tuple[str, ...]:
    """Short spellings first, then long; Typer may hand them over in set (random) order."""
    return tuple(sorted(names, key=lambda n: (n.startswith("--"), n)))


def _help_and_extras(param: Any, ctx: Any, markup: bool) -> str:
    """The help text plus what --help appends to it ("[default: x]", "[required]")."""
    raw = param.help or ""
    text = plain(raw, markup)
    record = param.get_help_record(ctx)
    if record and raw and record[1].startswith(raw):
        extras = record[1][len(raw):].strip()
    elif record and not raw:
        extras = record[1].strip()
    else:
        extras = ""
    return f"{text}  {extras}".strip() if extras else text


def _option(param: Any, ctx: Any, markup: bool) -> OptionSpec:
    choices, is_path = _type_info(param)
    takes_value = not param.is_flag and not getattr(param, "count", False)
    metavar = ""
    if takes_value:
        metavar = param.metavar or ("|".join(choices) if choices else param.name.upper())
    return OptionSpec(
        names=_ordered(param.opts),
        secondary=_ordered(param.secondary_opts),
        help=_help_and_extras(param, ctx, markup),
        metavar=metavar,
        takes_value=takes_value,
        choices=choices,
        is_path=is_path,
        multiple=bool(param.multiple),
        required=bool(param.required),
    )


def _argument(param: Any, ctx: Any, markup: bool) -> ArgumentSpec:
    choices, is_path = _type_info(param)
    name = (param.metavar or param.name).upper()
    if param.nargs != 1:
        name += "..."
    return ArgumentSpec(
        name=name,
        help=_help_and_extras(param, ctx, markup),
        choices=choices,
        is_path=is_path,
        nargs=param.nargs,
        required=bool(param.required),
    )


def _spec(cmd: Any, path: tuple[str, ...], ctx: Any, markup: bool) -> CommandSpec:
    help_text = plain(cmd.help, markup)
    summary = plain(cmd.short_help, markup) if cmd.short_help else ""
    if not summary:
        first = help_text.split("\n\n", 1)[0]
        summary = " ".join(first.replace("\b", "").split())
    spec = CommandSpec(path=path, summary=summary, help=help_text)
    for param in cmd.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "option":
            spec.options.append(_option(param, ctx, markup))
        elif param.param_type_name == "argument":
            spec.arguments.append(_argument(param, ctx, markup))
    if hasattr(cmd, "list_commands"):  # a group
        for sub_name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, sub_name)
            if sub is None or getattr(sub, "hidden", False):
                continue
            sub_ctx = sub.make_context(sub_name, [], parent=ctx, resilient_parsing=True)
            spec.subcommands.append(_spec(sub, (*path, sub_name), sub_ctx, markup))
    return spec


def command_tree(app: typer.Typer | None = None) -> CommandSpec:
    """The command tree of `app` (default: the kafkactl app as it is importable now)."""
    if app is None:
        app = importlib.import_module("kafkactl.cli.app").app
    cmd = typer.main.get_command(app)
    # kafkactl's help texts are literal (kafkactl.cli._help): `[v1,v2]` is text, not markup
    markup = getattr(app, "rich_markup_mode", "rich") == "rich" and \
        not getattr(app, "literal_help", False)
    ctx = cmd.make_context(PROG, [], resilient_parsing=True)
    return _spec(cmd, (), ctx, markup)


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def write_outputs(outputs: dict[Path, str], check: bool) -> int:
    """Write generated files, or with `check` report which committed ones differ."""
    stale = [p for p, text in outputs.items() if not p.exists() or p.read_text() != text]
    if check:
        for p in stale:
            print(f"stale: {_shown(p)}")
        return 1 if stale else 0
    for p, text in outputs.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return 0
