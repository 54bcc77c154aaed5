"""kcat-style output formats (`-f '%k\\t%s\\n'`) rendered a whole batch at a time.

A format is literal pieces between tokens. For a header-less magic-2 batch the tokens
that need no per-record decoding beyond key and value (%k %s %K %S %o %p %t %%) become
columns: one list per token over the batch's records (record.value_scan gives the keys,
values and offset deltas in one pass), interleaved with the literals by slice assignment
and joined once. Any other batch, or a format with %T or %h, is rendered record by record
by the caller; both give the same bytes (tests/client/test_record_format.py).

With the compiled kernels (record/_kernels.pyx), KernelFormat renders any -f format and -J
a whole batch at a time in C, headers and timestamps included, and tells where each record
ends in the bytes (the writer counts a cut write exactly by it). Its definition is the
per-record render (cli.consume's compile_format and json_renderer), which
tests/record/test_render_kernel.py proves it equal to.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from itertools import compress, count, repeat
from operator import is_
from typing import Any

from kafkactl.record._accel import kernels
from kafkactl.record.batch import COMPRESSION_MASK, TIMESTAMP_TYPE_MASK
from kafkactl.record.codecs import decompress
from kafkactl.record.value_scan import fast_columns

View = memoryview | bytes
# Tokens a batch can render from its keys, values and offsets (and topic, partition).
COLUMN_TOKENS = frozenset(b"kKsSopt%")


def _nulls_to(column: list[Any], null: bytes) -> list[Any]:
    """`column` with every None replaced by `null` (a copy only when there is a None)."""
    if None not in column:
        return column
    column = list(column)
    for i in compress(count(), map(is_, column, repeat(None))):
        column[i] = null
    return column


def _lengths(column: list[View | None]) -> list[bytes]:
    """%K / %S: each item's length in decimal, -1 for null."""
    out = list(map(b"%d".__mod__, map(len, _nulls_to(column, b""))))
    if None in column:
        for i in compress(count(), map(is_, column, repeat(None))):
            out[i] = b"-1"
    return out


class BatchFormat:
    """`pieces[0] tokens[0] pieces[1] ... pieces[-1]` per record, tokens given by their
    letter (b"k", b"s", ...). `render(batch, start, topic, partition)` is None when the
    batch needs the per-record path."""

    def __init__(self, pieces: Sequence[bytes], tokens: Sequence[bytes],
                 null: bytes = b"") -> None:
        if len(pieces) != len(tokens) + 1:
            raise ValueError("a format has one more literal piece than it has tokens")
        self.pieces = list(pieces)
        self.tokens = list(tokens)
        self.offsets = b"o" in tokens
        self.null = null  # %k / %s of a null key / value (kcat -Z: NULL)

    @classmethod
    def compile(cls, pieces: Sequence[bytes], tokens: Sequence[bytes],
                null: bytes = b"") -> BatchFormat | None:
        """The batch form of a format, or None when it has a token only a record can render
        (%T %h), or does not end each record with a newline (output pieces of more than one
        record end each with one: see cli.consume.RecordWriter)."""
        if not all(len(t) == 1 and t[0] in COLUMN_TOKENS for t in tokens):
            return None
        if not pieces[-1].endswith(b"\n"):
            return None
        return cls(pieces, tokens, null)

    def render(self, batch: Any, start: int, topic: str, partition: int
               ) -> tuple[bytes, int] | None:
        """(the rendered records of `batch` from offset `start`, how many), or None."""
        if batch.magic != 2:
            return None
        found = fast_columns(batch, start, keys=True, offsets=self.offsets)
        if found is None:
            return None
        keys, values, deltas = found
        n = len(values)
        if n == 0:
            return b"", 0
        # Per record: token, literal, token, ..., literal; the first record's leading
        # literal goes in front, and each record's last literal is joined with the next
        # record's leading one.
        slots: list[Sequence[Any]] = []
        literal = b""
        for tok, piece in zip(self.tokens, self.pieces[1:], strict=True):
            column = self._column(tok, keys, values, deltas, batch.base_offset, topic,
                                  partition)
            if isinstance(column, bytes):  # a constant: part of the literal around it
                literal += column + piece
                continue
            if literal:
                slots.append([literal] * n)
            slots.append(column)
            literal = piece
        head = self.pieces[0]
        if not slots:  # no per-record column: every record is the same bytes
            return (head + literal) * n, n
        slots.append([literal + head] * n)
        width = len(slots)
        out: list[Any] = [b""] * (width * n)
        for j, slot in enumerate(slots):
            out[j::width] = slot
        out[-1] = literal  # the last record ends with its own literal only
        return head + b"".join(out), n

    def _column(self, tok: bytes, keys: list[View | None] | None, values: list[View | None],
                deltas: list[int] | None, base: int, topic: str, partition: int
                ) -> list[Any] | bytes:
        if tok == b"s":
            return _nulls_to(values, self.null)
        if tok == b"k":
            assert keys is not None
            return _nulls_to(keys, self.null)
        if tok == b"S":
            return _lengths(values)
        if tok == b"K":
            assert keys is not None
            return _lengths(keys)
        if tok == b"o":
            assert deltas is not None
            return list(map(b"%d".__mod__, map(base.__add__, deltas)))
        if tok == b"p":
            return b"%d" % partition
        if tok == b"t":
            return topic.encode()
        return b"%"


# Tokens the kernel renders (constants p t % are folded into the literals around them).
KERNEL_TOKENS = frozenset(b"kKsSoTRhpt%")
MAX_KERNEL_TOKENS = 64  # _kernels.pyx's MAX_TOKENS
Program = tuple[list[bytes], bytes]


class KernelFormat:
    """A -f format (`pieces` between `tokens`, tokens by their letter) or -J (`json`, the
    partitions' leaders from `broker_of(topic, partition)`), rendered by the compiled
    kernel. `render(batch, start, topic, partition)` gives (bytes, records, ends), ends
    the end of each record in the bytes, or None when the batch needs the per-record path.
    Only made (`compile`, `json`) when the kernels are in use."""

    def __init__(self, pieces: Sequence[bytes], tokens: Sequence[bytes],
                 broker_of: Callable[[str, int], int] | None = None,
                 null: bytes = b"") -> None:
        self.pieces = list(pieces)
        self.tokens = list(tokens)
        self.broker_of = broker_of
        self.null = null  # %k / %s of a null key / value (kcat -Z: NULL)
        self._programs: dict[tuple[str, int, int, int], Program] = {}

    @classmethod
    def compile(cls, pieces: Sequence[bytes], tokens: Sequence[bytes],
                null: bytes = b"") -> KernelFormat | None:
        """The kernel's form of a -f format (tokens by letter), None without the kernels."""
        if kernels is None or len(tokens) > MAX_KERNEL_TOKENS:
            return None
        if len(pieces) != len(tokens) + 1:
            raise ValueError("a format has one more literal piece than it has tokens")
        if not all(len(t) == 1 and t[0] in KERNEL_TOKENS for t in tokens):
            return None
        return cls(pieces, tokens, null=null)

    @classmethod
    def plain(cls, sep: bytes | None) -> KernelFormat | None:
        """Plain output's form (topic_reader.plain_renderer): `value\\n`, or `key SEP
        value\\n`; None without the kernels."""
        if sep is None:
            return cls.compile([b"", b"\n"], [b"s"])
        return cls.compile([b"", sep, b"\n"], [b"k", b"s"])

    @classmethod
    def json(cls, broker_of: Callable[[str, int], int]) -> KernelFormat | None:
        """-J's form (cli.consume.json_renderer), None without the kernels."""
        if kernels is None:
            return None
        return cls([], [], broker_of)

    def render(self, batch: Any, start: int, topic: str, partition: int
               ) -> tuple[bytes, int, memoryview] | None:
        """(the rendered records of `batch` from offset `start`, how many, their ends)."""
        if batch.magic != 2 or kernels is None:
            return None
        log_append = bool(batch.attributes & TIMESTAMP_TYPE_MASK)
        broker = -1 if self.broker_of is None else self.broker_of(topic, partition)
        key = (topic, partition, log_append, broker)
        program = self._programs.get(key)
        if program is None:
            program = self._programs[key] = self._program(topic, partition, log_append, broker)
        section: Any = batch.records_section()
        codec = batch.attributes & COMPRESSION_MASK
        if codec:
            section = decompress(codec, section)
        found = kernels.render(section, batch.record_count, batch.base_offset,
                               batch.first_timestamp, log_append, batch.max_timestamp, start,
                               *program, self.null)
        if found is None:
            return None
        data, n, ends = found
        return data, n, memoryview(ends).cast("q")

    def _program(self, topic: str, partition: int, log_append: bool, broker: int) -> Program:
        """(literals, tokens) for the kernel: constants folded into the literals."""
        if self.broker_of is not None:  # -J: json_renderer's members, in its order
            head = (b'{"topic":' + json.dumps(topic, ensure_ascii=False).encode()
                    + b',"partition":%d,"offset":' % partition)
            tstype = b"logappend" if log_append else b"create"
            return ([head, b',"tstype":"' + tstype + b'","ts":',
                     b',"broker":' + json.dumps(broker).encode(), b',"key":', b',"payload":',
                     b"", b"}\n"], b"oTHjvE")
        literals = [self.pieces[0]]
        ops = bytearray()
        for tok, piece in zip(self.tokens, self.pieces[1:], strict=True):
            if tok == b"p":
                literals[-1] += b"%d" % partition + piece
            elif tok == b"t":
                literals[-1] += topic.encode() + piece
            elif tok == b"%":
                literals[-1] += b"%" + piece
            else:
                ops += tok
                literals.append(piece)
        return literals, bytes(ops)
