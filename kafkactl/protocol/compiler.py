"""Compile a declarative :class:`~kafkactl.protocol.schema.Message` into fast closures.

``compile_decoder(message, version)`` returns ``decode(buf, pos) -> (dict, pos)`` and
``compile_encoder(message, version)`` returns ``encode(out, parts, dict) -> None``. Both
are built once per (schema, version): every version test, flexible/compact choice,
nullability and default is resolved at compile time, and runs of consecutive fixed-width
fields are merged into a single ``struct`` call.

Decoding: ``buf`` must be a ``memoryview`` (records fields are zero-copy slices of it).
Encoding: bytes are appended to the ``bytearray`` ``out``; a records field holding a
:class:`~kafkactl.protocol.types.FileRegion` (or any object with ``fd``/``position``/
``length``), or a large in-memory buffer, flushes ``out`` into ``parts`` and is appended to
``parts`` as its own element, so the network layer can ``sendfile``/``sendmsg`` it without
a copy. The caller appends what is left in ``out`` at the end.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kafkactl.protocol.errors import ProtocolDecodeError, ProtocolEncodeError
from kafkactl.protocol.schema import MISSING, Field, Message
from kafkactl.protocol.types import (
    FIXED_FORMATS,
    INT16,
    INT32,
    FileRegion,
    read_array_length,
    read_uuid,
    read_uvarint,
    uuid_bytes,
    uvarint_bytes,
)

Decoder = Callable[[memoryview, int], tuple[Any, int]]
Encoder = Callable[[bytearray, "list[Any] | None", Any], None]

# In-memory records at least this big become their own part instead of being copied.
ZERO_COPY_THRESHOLD = 16 * 1024

_BUFFER_TYPES = (bytes, bytearray, memoryview)


# =============================================================================== decoding
def _string_decoder(compact: bool, nullable: bool) -> Decoder:
    unpack16 = INT16.unpack_from

    def read_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
        if compact:
            n, pos = read_uvarint(buf, pos)
            n -= 1
        else:
            n = unpack16(buf, pos)[0]
            pos += 2
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise ProtocolDecodeError(f"invalid string length {n} at position {pos}")
        end = pos + n
        if end > len(buf):
            raise ProtocolDecodeError(f"string of {n} bytes at position {pos} is truncated")
        return str(buf[pos:end], "utf-8"), end

    return read_string


def _bytes_decoder(compact: bool, nullable: bool, view: bool) -> Decoder:
    unpack32 = INT32.unpack_from

    def read_bytes(buf: memoryview, pos: int) -> tuple[Any, int]:
        if compact:
            n, pos = read_uvarint(buf, pos)
            n -= 1
        else:
            n = unpack32(buf, pos)[0]
            pos += 4
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise ProtocolDecodeError(f"invalid bytes length {n} at position {pos}")
        end = pos + n
        if end > len(buf):
            raise ProtocolDecodeError(f"{n} bytes at position {pos} run past the buffer end")
        return (buf[pos:end] if view else bytes(buf[pos:end])), end

    return read_bytes


def _primitive_decoder(ftype: str, flexible: bool, nullable: bool) -> Decoder:
    fmt = FIXED_FORMATS.get(ftype)
    if fmt is not None:
        s = struct.Struct(">" + fmt)
        unpack, size = s.unpack_from, s.size

        def read_fixed(buf: memoryview, pos: int) -> tuple[Any, int]:
            return unpack(buf, pos)[0], pos + size

        return read_fixed
    if ftype == "string":
        return _string_decoder(flexible, nullable)
    if ftype == "bytes":
        return _bytes_decoder(flexible, nullable, view=False)
    if ftype == "records":
        return _bytes_decoder(flexible, nullable, view=True)
    if ftype == "uuid":
        return read_uuid
    raise ValueError(f"unknown primitive type {ftype!r}")


def _min_size(f: Field, version: int, flexible: bool, element: bool = False) -> int:
    """The fewest bytes one value of this field (or one array element) can take."""
    if f.is_array and not element:
        return 1 if flexible else 4
    if f.fields and not element and f.nullable_in(version):
        return 1  # the null marker
    if f.fields:
        n = sum(
            _min_size(sub, version, flexible)
            for sub in f.fields
            if sub.present_in(version) and not sub.tagged_in(version)
        )
        return n + (1 if flexible else 0)
    t = f.element_type
    if t in FIXED_FORMATS:
        return struct.calcsize(">" + FIXED_FORMATS[t])
    if t == "uuid":
        return 16
    if t == "string":
        return 1 if flexible else 2
    return 1 if flexible else 4


def _nullable_struct_decoder(read_struct: Decoder) -> Decoder:
    """A nullable struct (not an array of them): Kafka writes an int8 marker first, -1 for
    null and 1 for a struct that follows."""

    def read_nullable_struct(buf: memoryview, pos: int) -> tuple[Any, int]:
        if pos >= len(buf):
            raise ProtocolDecodeError(f"nullable struct marker at position {pos} is truncated")
        marker = buf[pos]
        if marker >= 0x80:  # a negative int8: null
            return None, pos + 1
        return read_struct(buf, pos + 1)

    return read_nullable_struct


def _field_decoder(f: Field, version: int, flexible: bool) -> Decoder:
    nullable = f.nullable_in(version)
    if not f.is_array:
        if f.fields:
            if nullable:
                return _nullable_struct_decoder(struct_decoder(f.fields, version, flexible))
            return struct_decoder(f.fields, version, flexible)
        return _primitive_decoder(f.type, flexible, nullable)
    elem_type = f.element_type
    min_item = _min_size(f, version, flexible, element=True)
    fmt = FIXED_FORMATS.get(elem_type)
    if fmt is not None and not f.fields:
        width = struct.calcsize(">" + fmt)

        def read_fixed_array(buf: memoryview, pos: int) -> tuple[Any, int]:
            n, pos = read_array_length(
                buf, pos, compact=flexible, nullable=nullable, min_item=width
            )
            if n < 0:
                return None, pos
            return list(struct.unpack_from(f">{n}{fmt}", buf, pos)), pos + n * width

        return read_fixed_array
    elem = (
        struct_decoder(f.fields, version, flexible)
        if f.fields
        else _primitive_decoder(elem_type, flexible, False)
    )

    def read_array(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_array_length(buf, pos, compact=flexible, nullable=nullable, min_item=min_item)
        if n < 0:
            return None, pos
        items: list[Any] = []
        append = items.append
        for _ in range(n):
            v, pos = elem(buf, pos)
            append(v)
        return items, pos

    return read_array


def _is_fixed(f: Field) -> bool:
    return not f.is_array and not f.fields and f.type in FIXED_FORMATS


def _immutable(v: Any) -> bool:
    return not isinstance(v, list | dict)


def _copy_default(v: Any) -> Any:
    if isinstance(v, list):
        return list(v)
    if isinstance(v, dict):
        return {k: _copy_default(x) for k, x in v.items()}
    return v


def _gen(source: str, namespace: dict[str, Any], name: str) -> Any:
    """Compile generated source once; the function is looked up in ``namespace``."""
    exec(compile(source, f"<kafkactl.protocol {name}>", "exec"), namespace)  # noqa: S102
    return namespace[name]


# C901: generates one straight-line decoder: a branch per field kind
def struct_decoder(  # noqa: C901
        fields: tuple[Field, ...], version: int, flexible: bool) -> Decoder:
    """A decoder for a struct (a message body or a nested struct) at one version.

    Generates one straight-line function: merged ``struct`` unpacks for fixed-width runs,
    one call per variable-width field, and a dict display with every field (absent ones
    at their defaults).
    """
    ns: dict[str, Any] = {"_copy": _copy_default, "read_uvarint": read_uvarint,
                          "ProtocolDecodeError": ProtocolDecodeError}
    body: list[str] = []
    items: list[str] = []  # "'name': expr" entries of the resulting dict
    tagged: dict[int, tuple[str, Decoder]] = {}
    run: list[Field] = []
    counter = [0]

    def sym(prefix: str, value: Any) -> str:
        counter[0] += 1
        name = f"{prefix}{counter[0]}"
        ns[name] = value
        return name

    def default_expr(f: Field) -> str:
        dv = f.default_value(version)
        if isinstance(dv, list) and not dv:
            return "[]"
        if _immutable(dv):
            return sym("D", dv)
        return f"_copy({sym('D', dv)})"

    def flush_run() -> None:
        if not run:
            return
        s = struct.Struct(">" + "".join(FIXED_FORMATS[f.type] for f in run))
        unpack = sym("U", s.unpack_from)
        names = [f"v{counter[0]}_{i}" for i in range(len(run))]
        body.append(f"    {', '.join(names)}, = {unpack}(buf, pos)")
        body.append(f"    pos += {s.size}")
        items.extend(f"{f.name!r}: {n}" for f, n in zip(run, names, strict=True))
        run.clear()

    for f in fields:
        present = f.present_in(version)
        if present and flexible and f.tagged_in(version):
            tagged[f.tag] = (f.name, _field_decoder(f, version, True))  # type: ignore[index]
            present = False
        if not present:
            items.append(f"{f.name!r}: {default_expr(f)}")
            continue
        if _is_fixed(f):
            run.append(f)
            continue
        flush_run()
        reader = sym("R", _field_decoder(f, version, flexible))
        var = f"v{counter[0]}"
        body.extend(_inline_read(f, version, flexible, var, reader, sym))
        items.append(f"{f.name!r}: {var}")
    flush_run()

    def read_tags(buf: memoryview, pos: int, d: dict[str, Any]) -> int:
        count, pos = read_uvarint(buf, pos)
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise ProtocolDecodeError(f"tagged field {tag} at position {pos} is truncated")
            entry = tagged.get(tag)
            if entry is not None:
                d[entry[0]] = entry[1](buf[:end], pos)[0]
            pos = end
        return pos

    ns["read_tags"] = read_tags
    src = ["def read_struct(buf, pos):", "    size = len(buf)", *body,
           f"    d = {{{', '.join(items)}}}"]
    if flexible:
        src.append("    if buf[pos] == 0:")
        src.append("        return d, pos + 1")
        src.append("    return d, read_tags(buf, pos, d)")
    else:
        src.append("    return d, pos")
    return _gen("\n".join(src) + "\n", ns, "read_struct")


def _inline_read(f: Field, version: int, flexible: bool, var: str, reader: str,
                 sym: Callable[[str, Any], str]) -> list[str]:
    """Source reading field `f` into `var`. Compact strings and compact arrays of structs
    (most of a flexible request) are read inline when their length takes one byte and
    fits; anything else (null, long, truncated, another type) goes to `reader`, the
    general decoder, which also raises the errors."""
    general = [f"        {var}, pos = {reader}(buf, pos)"]
    if flexible and not f.is_array and not f.fields and f.type == "string":
        return ["    b = buf[pos]", "    if 0 < b < 0x80 and pos + b <= size:",
                f"        {var} = str(buf[pos + 1:pos + b], 'utf-8')",
                "        pos += b", "    else:", *general]
    if flexible and f.is_array and f.fields:
        elem = sym("E", struct_decoder(f.fields, version, flexible))
        least = _min_size(f, version, flexible, element=True)
        return ["    b = buf[pos]", f"    if 0 < b < 0x80 and (b - 1) * {least} <= size - pos - 1:",
                "        pos += 1", f"        {var} = []",
                "        for _ in range(b - 1):", f"            e, pos = {elem}(buf, pos)",
                f"            {var}.append(e)", "    else:", *general]
    return [general[0][4:]]


def compile_decoder(message: Message, version: int) -> Decoder:
    return struct_decoder(message.fields, version, message.is_flexible(version))


# =============================================================================== encoding
def _length_writer(compact: bool, wide: bool) -> Callable[[bytearray, int], None]:
    if compact:

        def write_compact(out: bytearray, n: int) -> None:
            out += uvarint_bytes(n + 1)

        return write_compact
    pack = INT32.pack if wide else INT16.pack

    def write_plain(out: bytearray, n: int) -> None:
        out += pack(n)

    return write_plain


# C901: a flat dispatch on the primitive type, one closure per type
def _primitive_encoder(  # noqa: C901
        ftype: str, flexible: bool, nullable: bool, where: str) -> Encoder:
    fmt = FIXED_FORMATS.get(ftype)
    if fmt is not None:
        pack = struct.Struct(">" + fmt).pack

        def write_fixed(out: bytearray, parts: list[Any] | None, v: Any) -> None:
            out += pack(v)

        return write_fixed
    if ftype == "uuid":

        def write_uuid(out: bytearray, parts: list[Any] | None, v: Any) -> None:
            out += uuid_bytes(v)

        return write_uuid
    if ftype == "string":
        length = _length_writer(flexible, False)

        def write_string(out: bytearray, parts: list[Any] | None, v: Any) -> None:
            if v is None:
                if not nullable:
                    raise ProtocolEncodeError(f"{where} is not nullable here, got None")
                length(out, -1)
                return
            data = v.encode("utf-8")
            if len(data) > 0x7FFF and not flexible:
                raise ProtocolEncodeError(f"{where}: string longer than 32767 bytes")
            length(out, len(data))
            out += data

        return write_string
    if ftype in ("bytes", "records"):
        length = _length_writer(flexible, True)
        records = ftype == "records"

        def write_bytes(out: bytearray, parts: list[Any] | None, v: Any) -> None:
            if v is None:
                if not nullable:
                    raise ProtocolEncodeError(f"{where} is not nullable here, got None")
                length(out, -1)
                return
            if v.__class__ is FileRegion and records and parts is not None:
                length(out, v.length)
                parts.append(bytes(out))
                out.clear()
                parts.append(v)
                return
            if isinstance(v, _BUFFER_TYPES):
                n = v.nbytes if isinstance(v, memoryview) else len(v)
                length(out, n)
                if records and parts is not None and n >= ZERO_COPY_THRESHOLD:
                    parts.append(bytes(out))
                    out.clear()
                    parts.append(v)
                else:
                    out += v
                return
            if not records or parts is None or not hasattr(v, "fd"):
                raise ProtocolEncodeError(f"{where}: cannot encode {type(v).__name__}")
            length(out, v.length)
            parts.append(bytes(out))
            out.clear()
            parts.append(v if isinstance(v, FileRegion) else FileRegion(v.fd, v.position, v.length))

        return write_bytes
    raise ValueError(f"unknown primitive type {ftype!r}")


def _nullable_struct_encoder(write_struct: Encoder) -> Encoder:
    """A nullable struct: an int8 marker (-1 null, 1 present), then the struct if present
    (Kafka's generated writers)."""

    def write_nullable_struct(out: bytearray, parts: list[Any] | None, v: Any) -> None:
        if v is None:
            out.append(0xFF)
            return
        out.append(1)
        write_struct(out, parts, v)

    return write_nullable_struct


def _field_encoder(f: Field, version: int, flexible: bool, where: str) -> Encoder:
    nullable = f.nullable_in(version)
    if not f.is_array:
        if f.fields:
            if nullable:
                return _nullable_struct_encoder(
                    struct_encoder(f.fields, version, flexible, where))
            return struct_encoder(f.fields, version, flexible, where)
        return _primitive_encoder(f.type, flexible, nullable, where)
    length = _length_writer(flexible, True)
    fmt = FIXED_FORMATS.get(f.element_type)
    if fmt is not None and not f.fields:

        def write_fixed_array(out: bytearray, parts: list[Any] | None, v: Any) -> None:
            if v is None:
                if not nullable:
                    raise ProtocolEncodeError(f"{where} is not nullable here, got None")
                length(out, -1)
                return
            length(out, len(v))
            out += struct.pack(f">{len(v)}{fmt}", *v)

        return write_fixed_array
    elem = (
        struct_encoder(f.fields, version, flexible, where)
        if f.fields
        else _primitive_encoder(f.element_type, flexible, False, where + "[]")
    )

    def write_array(out: bytearray, parts: list[Any] | None, v: Any) -> None:
        if v is None:
            if not nullable:
                raise ProtocolEncodeError(f"{where} is not nullable here, got None")
            length(out, -1)
            return
        length(out, len(v))
        for item in v:
            elem(out, parts, item)

    return write_array


def _inline_write(f: Field, version: int, flexible: bool, path: str, value: str,
                  writer: str, sym: Callable[[str, Any], str]) -> list[str]:
    """Source writing `value` for field `f`. A compact string that is a str and a compact
    array of structs that is a list are written inline; anything else (None, other
    types, errors) goes to `writer`, the general encoder."""
    general = [f"        {writer}(out, parts, v)"]
    if flexible and not f.is_array and not f.fields and f.type == "string":
        return [f"    v = {value}", "    if v.__class__ is str:", "        e = v.encode()",
                "        out += uvarint_bytes(len(e) + 1)", "        out += e", "    else:",
                *general]
    if flexible and f.is_array and f.fields:
        elem = sym("E", struct_encoder(f.fields, version, flexible, path))
        return [f"    v = {value}", "    if v.__class__ is list:",
                "        out += uvarint_bytes(len(v) + 1)",
                "        for e in v:", f"            {elem}(out, parts, e)", "    else:",
                *general]
    return [f"    {writer}(out, parts, {value})"]


def struct_encoder(
    fields: tuple[Field, ...], version: int, flexible: bool, where: str = ""
) -> Encoder:
    """An encoder for a struct at one version; missing keys take the spec default.

    Generated as one straight-line function, like :func:`struct_decoder`.
    """
    ns: dict[str, Any] = {"ProtocolEncodeError": ProtocolEncodeError, "dict": dict,
                          "uvarint_bytes": uvarint_bytes}
    body: list[str] = []
    tagged: list[tuple[int, str, Any, Encoder]] = []
    run: list[Field] = []
    counter = [0]

    def sym(prefix: str, value: Any) -> str:
        counter[0] += 1
        name = f"{prefix}{counter[0]}"
        ns[name] = value
        return name

    def flush_run() -> None:
        if not run:
            return
        pack = sym("P", struct.Struct(">" + "".join(FIXED_FORMATS[f.type] for f in run)).pack)
        args = ", ".join(f"get({f.name!r}, {sym('D', f.default_value(version))})" for f in run)
        body.append(f"    out += {pack}({args})")
        run.clear()

    for f in fields:
        if not f.present_in(version):
            continue
        path = f"{where}.{f.name}" if where else f.name
        if flexible and f.tagged_in(version):
            enc = _field_encoder(f, version, True, path)
            tagged.append((f.tag, f.name, f.default_value(version), enc))  # type: ignore[arg-type]
            continue
        if _is_fixed(f):
            run.append(f)
            continue
        flush_run()
        writer = sym("W", _field_encoder(f, version, flexible, path))
        dv = sym("D", f.default_value(version))
        body.extend(_inline_write(f, version, flexible, path, f"get({f.name!r}, {dv})",
                                  writer, sym))
    flush_run()
    tags = tuple(sorted(tagged, key=lambda t: t[0]))

    def write_tags(out: bytearray, d: dict[str, Any]) -> None:
        entries = []
        for tag, name, dv, enc in tags:
            v = d.get(name, MISSING)
            if v is MISSING or v == dv:
                continue
            tmp = bytearray()
            enc(tmp, None, v)
            entries.append((tag, tmp))
        out += uvarint_bytes(len(entries))
        for tag, tmp in entries:
            out += uvarint_bytes(tag)
            out += uvarint_bytes(len(tmp))
            out += tmp

    ns["write_tags"] = write_tags
    ns["WHERE"] = where or "message"
    src = [
        "def write_struct(out, parts, d):",
        "    try:",
        "        get = d.get",
        "    except AttributeError:",
        "        raise ProtocolEncodeError(f'{WHERE}: expected a dict, got {d!r}') from None",
        *body,
    ]
    if flexible:
        if tags:
            absent = " and ".join(f"{name!r} not in d" for _t, name, _d, _e in tags)
            src.append(f"    if {absent}:")
            src.append("        out.append(0)")
            src.append("    else:")
            src.append("        write_tags(out, d)")
        else:
            src.append("    out.append(0)")
    src.append("    return None")
    return _gen("\n".join(src) + "\n", ns, "write_struct")


def compile_encoder(message: Message, version: int) -> Encoder:
    return struct_encoder(message.fields, version, message.is_flexible(version), message.name)
