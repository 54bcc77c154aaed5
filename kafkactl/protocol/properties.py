"""Java .properties text (server.properties, client config files), parsed without I/O."""

from __future__ import annotations


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java .properties text: `k=v`, `k: v` or `k v`, `#`/`!` comments, `\\` continuations."""
    out: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry = "".join(logical)
        logical = []
        key, value = _split_property(entry)
        out[key] = value
    if logical:
        key, value = _split_property("".join(logical))
        out[key] = value
    return out


def _split_property(entry: str) -> tuple[str, str]:
    for i, ch in enumerate(entry):
        if ch in "=:" or ch.isspace():
            rest = entry[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return entry[:i].strip(), rest.strip()
    return entry.strip(), ""
