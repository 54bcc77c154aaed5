"""`--help` rendering fixes that apply to every command.

Typer renders `--help` with rich (panels, a table of options). Three of its defaults do not
suit a CLI whose help texts quote Kafka's syntax and whose flags are long, so they are set
here, once, for every command (`apply_help_rendering()`, called when the app is built):

- help texts are literal: `HOST:PORT[/chroot]` and `k2=[v1,v2]` are text, not rich markup
  (markup made the first a crash and silently dropped the second);
- option names and value types are never cut: at 80 columns rich shrank every column of the
  options table, `--source-zookeeper` became `--source-zookeep…`; now only the help text
  column gives way, and it wraps (a word longer than its column folds, never ellipsised);
- flags show no value type (`--from-beginning`, not `--from-beginning <bool>`).

Start-up: rich and Typer's rich help module cost more than the rest of a command's
start-up, and only `--help` uses them, so they are imported (and fixed) when a command
first renders its help, not when the app is built; and without rich.markdown and
rich.traceback (markdown_it, pygments), which Typer imports for markdown help texts and
pretty tracebacks, neither of which kafkactl uses (`_import_rich_utils`).
"""

from __future__ import annotations

import inspect
import re
import sys
import types
from typing import Any

_APPLIED = "_kafkactl_help_rendering"


def hide_flag_value_types() -> None:
    """Flags (`--from-beginning`, `--json`, `--help`) take no value, so `--help` must not
    show a value type after them. Typer's rich help formatter asks every option for its
    type column (`display_type_rich`), which for a bool flag answers `<bool>`, as if the
    flag took one; its plain formatter already skips flags. Answer nothing for flags and
    counters, so both formatters agree. Options that take a value are unchanged."""
    from typer.core import TyperOption

    option_class: Any = TyperOption  # its attributes differ between Typer versions
    original = option_class.__dict__.get("display_type_rich")
    if original is None or getattr(original, "_kafkactl_flags_hidden", False):
        return  # an older Typer without the type column, or already applied

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if self.is_flag or getattr(self, "count", False):
            return None
        return original(self, ctx)

    display_type_rich._kafkactl_flags_hidden = True  # type: ignore[attr-defined]
    option_class.display_type_rich = display_type_rich


def _literal_help_text(rich_utils: Any) -> None:
    """Help texts as written: no rich markup, no :emoji: codes (Typer's "rich" markup mode
    parses both, so `[/chroot]` raised MarkupError and `[v1,v2]` vanished). Markdown mode,
    which no command here uses, is left as Typer has it."""
    from rich.text import Text

    original = getattr(rich_utils, "_make_rich_text", None)
    highlighter = getattr(rich_utils, "highlighter", None)
    if original is None or highlighter is None:
        return  # a Typer whose help rendering we do not know: leave it alone

    def make_rich_text(*, text: str, style: str = "", markup_mode: Any) -> Any:
        if markup_mode != "rich":
            return original(text=text, style=style, markup_mode=markup_mode)
        text = _reflow(inspect.cleandoc(text))
        if "\033[" in text:  # text already styled with ANSI codes, as Typer allows
            shown = Text.from_ansi(text, style=style, overflow="fold")
        else:
            shown = Text(text, style=style, overflow="fold")
        return highlighter(shown)  # a word wider than its column folds, not "word…"

    rich_utils._make_rich_text = make_rich_text


def _reflow(text: str) -> str:
    """A docstring's paragraphs as flowing text, as Click and Typer show them: the line
    breaks inside a paragraph are the source's, not the reader's. A paragraph that starts
    with Click's `\\b`, or whose later lines are indented or list items, keeps its lines."""
    paragraphs = []
    for para in re.split(r"\n[ \t]*\n", text):
        lines = para.splitlines()
        if para.startswith("\b"):
            paragraphs.append(para[1:].lstrip("\n"))
        elif any(line.startswith((" ", "\t", "- ", "* ")) for line in lines[1:]):
            paragraphs.append(para)
        else:
            paragraphs.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(paragraphs)


def _whole_option_names(rich_utils: Any) -> None:
    """Typer's options and commands tables hold names (option spellings, value types,
    command names) in every column but the last, which holds the help text. Give every
    name column `no_wrap`, so that when the table is too wide rich narrows (and wraps) the
    help column alone, and let a help word longer than its column fold rather than end
    in an ellipsis.

    An options row is `[required,] long, short, negative long, negative short, type, help`
    (the negatives: `--no-x` of a `--x/--no-x` flag). A negative spelling goes under its
    positive one, in the same column, instead of in a column of its own that all other
    options leave empty: at 80 columns that column alone took the help text's place."""
    from rich.table import Table
    from rich.text import Text

    base = getattr(rich_utils, "Table", None)
    if base is not Table:
        return  # not the rich Table we know (or already replaced)

    def stacked(first: Any, second: Any) -> Any:
        if not isinstance(first, Text) or not isinstance(second, Text) or not second.plain:
            return first
        if not first.plain:
            return second
        return Text("\n").join([first, second])

    class HelpTable(Table):
        def add_row(self, *renderables: Any, **kwargs: Any) -> None:
            cells = list(renderables)
            if len(cells) in (6, 7) and all(isinstance(c, Text) for c in cells[-6:-2]):
                head, (long, short, neg_long, neg_short), tail = (
                    cells[:-6], cells[-6:-2], cells[-2:])
                cells = [*head, stacked(long, neg_long), stacked(short, neg_short), *tail]
            super().add_row(*cells, **kwargs)
            *names, help_column = self.columns
            for column in names:
                column.no_wrap = True
            help_column.no_wrap = False
            help_column.overflow = "fold"

    rich_utils.Table = HelpTable


class _Markdown:
    """rich.markdown.Markdown, imported when first made: a help text in markdown mode."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from rich.markdown import Markdown

        return Markdown(*args, **kwargs)


class _Traceback:
    """rich.traceback.Traceback, imported when first used: Typer's pretty exceptions."""

    @classmethod
    def from_exception(cls, *args: Any, **kwargs: Any) -> Any:
        from rich.traceback import Traceback

        return Traceback.from_exception(*args, **kwargs)


def _import_rich_utils() -> Any:
    """typer.rich_utils, imported without rich.markdown and rich.traceback (~70 ms of its
    ~120: markdown_it, pygments): while it imports, those two modules are stand-ins whose
    one class imports the real module when first used, then they are taken out again, so
    that any later `import rich.markdown` imports the real one."""
    stand_ins = {"rich.markdown": ("Markdown", _Markdown),
                 "rich.traceback": ("Traceback", _Traceback)}
    added: dict[str, types.ModuleType] = {}
    for name, (attr, cls) in stand_ins.items():
        if name not in sys.modules:
            module = types.ModuleType(name)
            setattr(module, attr, cls)
            added[name] = sys.modules[name] = module
    try:
        from typer import rich_utils
    finally:
        for name, module in added.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
    return rich_utils


def load_help_rendering() -> None:
    """Import Typer's rich help rendering and apply the fixes above to it; idempotent."""
    try:
        rich_utils = _import_rich_utils()
    except ImportError:  # Typer without rich: click's plain help, which needs none of this
        return
    if getattr(rich_utils, _APPLIED, False):
        return
    _literal_help_text(rich_utils)
    _whole_option_names(rich_utils)
    setattr(rich_utils, _APPLIED, True)


def _load_before_format_help() -> None:
    """Every command's help goes through `format_help` (Typer's commands and groups alike),
    which imports typer.rich_utils: load (and fix) it first."""
    from typer.core import TyperCommand, TyperGroup

    for cls in (TyperCommand, TyperGroup):
        original = cls.__dict__.get("format_help")
        if original is None or getattr(original, "_kafkactl_loads_help", False):
            continue

        def format_help(self: Any, ctx: Any, formatter: Any, _original: Any = original) -> Any:
            load_help_rendering()
            return _original(self, ctx, formatter)

        format_help._kafkactl_loads_help = True  # type: ignore[attr-defined]
        cls.format_help = format_help  # type: ignore[method-assign]


def apply_help_rendering() -> None:
    """Every `--help` fix above, the rich ones when help is first rendered; idempotent."""
    hide_flag_value_types()
    _load_before_format_help()
