"""The data model of our declarative message tables.

Each API has one module in :mod:`kafkactl.protocol.messages` holding a ``REQUEST`` and a
``RESPONSE`` :class:`Message`, written as plain data::

    F("transactional_id", "string", "3+", nullable="3+", default=None)

* ``type``: ``int8 int16 int32 int64 uint16 uint32 float64 bool string bytes records uuid``,
  ``[]<primitive>`` (array of a primitive), ``[]<StructName>`` (array of structs, with
  ``fields``) or ``<StructName>`` (a single struct, with ``fields``).
* ``versions`` / ``nullable`` / ``tagged``: Kafka's version-range syntax (``"3+"``,
  ``"0-4"``, ``"2"``, ``None`` = never).
* ``tag``: the tag number of a tagged field (flexible versions only).
* ``default``: the spec default (``MISSING`` = the type's natural default).

Names are the spec names in snake_case; the spec-conformance test
(``tests/protocol/test_spec_conformance.py``) checks every table against Kafka's JSON.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

MAX_VERSION = 0x7FFF


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

ZERO_UUID = uuid.UUID(int=0)


def parse_range(spec: str | None) -> tuple[int, int] | None:
    """``"3+"`` -> (3, 32767); ``"1-4"`` -> (1, 4); ``"2"`` -> (2, 2); None/"none" -> None."""
    if spec is None or spec in ("none", ""):
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    if "-" in spec:
        lo, hi = spec.split("-", 1)
        return int(lo), int(hi)
    return int(spec), int(spec)


def in_range(spec: str | None, version: int) -> bool:
    r = parse_range(spec)
    return r is not None and r[0] <= version <= r[1]


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: str
    versions: str = "0+"
    nullable: str | None = None
    tag: int | None = None
    tagged: str | None = None
    default: Any = MISSING
    fields: tuple[Field, ...] = ()

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return bool(self.fields)

    def present_in(self, version: int) -> bool:
        return in_range(self.versions, version)

    def nullable_in(self, version: int) -> bool:
        return in_range(self.nullable, version)

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and in_range(self.tagged, version)

    def default_value(self, version: int) -> Any:
        """The value a field takes when it is absent (Kafka's generator rules)."""
        if self.default is not MISSING:
            return self.default
        if self.is_array:
            return []
        if self.is_struct:
            return {f.name: f.default_value(version) for f in self.fields}
        t = self.type
        if t in ("string",):
            return ""
        if t == "bytes":
            return b""
        if t == "records":
            return None
        if t == "bool":
            return False
        if t == "float64":
            return 0.0
        if t == "uuid":
            return ZERO_UUID
        return 0


# Short alias used by the tables.
F = Field


@dataclass(frozen=True, slots=True)
class Message:
    """One request, response or data schema."""

    name: str
    api_key: int | None
    valid: str
    flexible: str | None
    fields: tuple[Field, ...] = field(default_factory=tuple)

    @property
    def min_version(self) -> int:
        r = parse_range(self.valid)
        assert r is not None
        return r[0]

    @property
    def max_version(self) -> int:
        r = parse_range(self.valid)
        assert r is not None
        return r[1]

    def is_flexible(self, version: int) -> bool:
        return in_range(self.flexible, version)
