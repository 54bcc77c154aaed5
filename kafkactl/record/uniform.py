"""The byte layout of a "uniform" v2 records section: every record has a null key, no
headers, timestamp delta 0, offset delta = its index, and a value of one same length.

Line producers write exactly this (`kafkactl produce` of fixed-size lines), and for it both
directions can skip the per-record Python loop: the producer interleaves cached record
heads with the values, and the consumer slices the values out at known positions and
proves the layout by re-assembling the section and comparing bytes (a C-level join and
memcmp), so a section that differs in any byte takes the general decoder instead.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from operator import itemgetter

from kafkactl.record.varint import _UNSIGNED_CACHE

# ZIGZAG[n]: zig-zag varint of a small non-negative n (= the unsigned varint of 2n).
ZIGZAG: tuple[bytes, ...] = _UNSIGNED_CACHE[0::2]
MAX_RECORDS = len(ZIGZAG) - 1  # offset deltas a layout covers
MAX_VALUE_SIZE = 4096  # longer values gain nothing from this path
MIN_RUN = 16  # fewer records take the per-record loop

# attributes(0) + timestamp delta(0) + offset delta d + null key, for every d.
VALUE_ONLY_PREFIX: tuple[bytes, ...] = tuple(
    b"\x00\x00" + ZIGZAG[d] + b"\x01" for d in range(len(ZIGZAG)))


class UniformLayout:
    """Records of one value length, by offset delta d: `heads[d]` (length varint ..
    value length varint; the record is heads[d] + value + b"\\x00"), `ends[d]` (bytes of
    records 0..d-1) and `value_at[d]` (the slice of record d's value in the section).
    The tables grow on demand, so a layout costs in proportion to the records it served."""

    __slots__ = ("value_size", "heads", "ends", "value_at", "_lv")

    def __init__(self, value_size: int) -> None:
        self.value_size = value_size
        self._lv = ZIGZAG[value_size]
        self.heads: list[bytes] = []
        self.ends: list[int] = [0]
        self.value_at: list[slice] = []

    def ensure(self, count: int) -> None:
        """Make the tables cover offset deltas 0..count-1 (count <= MAX_RECORDS)."""
        heads, ends, value_at = self.heads, self.ends, self.value_at
        if len(heads) >= count:
            return
        lv, size = self._lv, self.value_size
        total = ends[-1]
        for prefix in VALUE_ONLY_PREFIX[len(heads):min(count, MAX_RECORDS)]:
            head = ZIGZAG[len(prefix) + len(lv) + size + 1] + prefix + lv
            heads.append(head)
            start = total + len(head)
            value_at.append(slice(start, start + size))
            total = start + size + 1
            ends.append(total)

    def fit(self, first_delta: int, room: int) -> int:
        """How many records from offset delta `first_delta` fit in `room` bytes (0 when
        `first_delta` is past the tables or there is no room)."""
        if first_delta >= MAX_RECORDS or room <= 0:
            return 0
        upper = min(MAX_RECORDS, first_delta + room // (self.value_size + 5) + 1)
        self.ensure(upper)
        ends = self.ends
        return bisect_right(ends, ends[first_delta] + room, first_delta) - 1 - first_delta

    def size_of(self, first_delta: int, count: int) -> int:
        """Bytes of records first_delta .. first_delta+count-1."""
        self.ensure(first_delta + count)
        return self.ends[first_delta + count] - self.ends[first_delta]

    def encode(self, values: Sequence[bytes], first_delta: int) -> list[bytes]:
        """Parts to join for records first_delta.. holding `values` (all value_size long)."""
        self.ensure(first_delta + len(values))
        out: list[bytes] = [b"\x00"] * (3 * len(values))  # every third: header count 0
        out[0::3] = self.heads[first_delta:first_delta + len(values)]
        out[1::3] = values
        return out

    def decode(self, section: bytes | memoryview, count: int) -> tuple[bytes, ...] | None:
        """The `count` values of a section in this layout, or None when the section is not
        exactly that. (Bytes, not memoryviews: slicing and comparing bytes is C-speed, while
        a memoryview comparison unpacks item by item.)"""
        if count < MIN_RUN or count > MAX_RECORDS:
            return None
        self.ensure(count)
        if len(section) != self.ends[count]:
            return None
        data = section if isinstance(section, bytes) else bytes(section)
        values: tuple[bytes, ...] = itemgetter(*self.value_at[:count])(data)
        if b"".join(self.encode(values, 0)) != data:
            return None
        return values


_LAYOUTS: dict[int, UniformLayout] = {}
_MAX_LAYOUTS = 16  # value lengths kept (each up to ~1-2 MB of small objects)


def layout_for(value_size: int) -> UniformLayout:
    layout = _LAYOUTS.get(value_size)
    if layout is None:
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.clear()
        layout = _LAYOUTS[value_size] = UniformLayout(value_size)
    return layout


def uniform_values(section: bytes | memoryview, count: int) -> tuple[bytes, ...] | None:
    """The values of `section` (a v2 records section of `count` records) when it has the
    uniform layout; None otherwise (the caller decodes it record by record)."""
    if count < MIN_RUN or len(section) < 8:
        return None
    size = _record_size(section, 0)
    if size is None:
        return None
    # Cheap rejection before any table: records 1 and 2 must be as long as record 0
    # (offset deltas 1 and 2 still take one varint byte).
    second = size[0] + size[1]
    for at in (second, 2 * second):
        if at + 2 > len(section) or _record_size(section, at) != size:
            return None
    record_size = size[0]
    # record_size = 4 (prefix of delta 0) + len(value length varint) + value_size + 1
    for lv_len in (1, 2):
        value_size = record_size - 5 - lv_len
        if 0 <= value_size < MAX_VALUE_SIZE and len(ZIGZAG[value_size]) == lv_len:
            return layout_for(value_size).decode(section, count)
    return None


def _record_size(section: bytes | memoryview, at: int) -> tuple[int, int] | None:
    """(record length, bytes of its length varint) at `at`, for 1-2 byte varints."""
    b0 = section[at]
    if b0 < 0x80:
        return b0 >> 1, 1
    b1 = section[at + 1]
    if b1 < 0x80:
        return ((b0 & 0x7F) | (b1 << 7)) >> 1, 2
    return None
