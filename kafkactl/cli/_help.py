"""`--help` rendering fixes that apply to every command."""

from __future__ import annotations

from typing import Any


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
