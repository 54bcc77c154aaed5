"""Reading Kafka's protocol JSON specs (the files with ``//`` comments).

Used only by the table generator script and the spec-conformance test; the codec itself
never reads JSON at run time (the committed tables in :mod:`kafkactl.protocol.messages`
are plain Python data).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_CAMEL_1 = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CAMEL_2 = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    """``TopicData`` -> ``topic_data``, ``protocolType`` -> ``protocol_type``."""
    return _CAMEL_1.sub("_", _CAMEL_2.sub("_", name)).lower()


def strip_comments(text: str) -> str:
    """Drop ``//`` comments (outside strings) and trailing commas before ``]``/``}``."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif c == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def load_spec(path: Path) -> dict[str, Any]:
    return json.loads(strip_comments(path.read_text(encoding="utf-8")))


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    """``"3+"`` -> (3, 32767), ``"1-4"`` -> (1, 4), ``"2"`` -> (2, 2), ``"none"`` -> None."""
    if spec is None or spec == "none" or spec == "":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), 0x7FFF
    if "-" in spec:
        lo, hi = spec.split("-", 1)
        return int(lo), int(hi)
    return int(spec), int(spec)


def resolve_common_structs(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the message's fields with every reference to a commonStruct inlined."""
    common = {s["name"]: s for s in spec.get("commonStructs", [])}

    def resolve(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
        result = []
        for f in fields:
            f = dict(f)
            t = f["type"]
            base = t[2:] if t.startswith("[]") else t
            if "fields" in f:
                f["fields"] = resolve(f["fields"])
            elif base in common:
                f["fields"] = resolve(common[base]["fields"])
            result.append(f)
        return result

    return resolve(spec.get("fields", []))
