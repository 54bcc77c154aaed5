"""The byte layout of a "uniform" v2 records section: every record has a null key, no
headers, timestamp delta 0, offset delta = its index, and a value of one same length.

Line producers write exactly this (`kafkactl produce` of fixed-size lines), and for it both
directions can skip the per-record Python loop: the producer interleaves cached record
heads with the values, and the consumer slices the values out at known positions and
proves the layout by re-assembling the section and comparing bytes (a C-level join and
memcmp), so a section that differs in any byte takes the general decoder instead.
"""

from __future__ import annotations

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
    records 0..d-1) and `value_at[d]` (the slice of record d's value in the section)."""

    __slots__ = ("value_size", "heads", "ends", "value_at")

    def __init__(self, value_size: int) -> None:
        lv = ZIGZAG[value_size]
        self.value_size = value_size
        self.heads: list[bytes] = []
        self.ends: list[int] = [0]
        self.value_at: list[slice] = []
        total = 0
        for prefix in VALUE_ONLY_PREFIX[:MAX_RECORDS]:
            head = ZIGZAG[len(prefix) + len(lv) + value_size + 1] + prefix + lv
            self.heads.append(head)
            start = total + len(head)
            self.value_at.append(slice(start, start + value_size))
            total = start + value_size + 1
            self.ends.append(total)

    def encode(self, values: list[bytes] | tuple[bytes, ...], first_delta: int) -> list[bytes]:
        """Parts to join for records first_delta.. holding `values` (all value_size long)."""
        out: list[bytes] = [b"\x00"] * (3 * len(values))  # every third: header count 0
        out[0::3] = self.heads[first_delta:first_delta + len(values)]
        out[1::3] = values
        return out

    def decode(self, section: bytes | memoryview, count: int) -> tuple[bytes, ...] | None:
        """The `count` values of a section in this layout, or None when the section is not
        exactly that. (Bytes, not memoryviews: slicing and comparing bytes is C-speed, while
        a memoryview comparison unpacks item by item.)"""
        if count < MIN_RUN or count > MAX_RECORDS or len(section) != self.ends[count]:
            return None
        data = section if isinstance(section, bytes) else bytes(section)
        values: tuple[bytes, ...] = itemgetter(*self.value_at[:count])(data)
        if b"".join(self.encode(values, 0)) != data:
            return None
        return values


_LAYOUTS: dict[int, UniformLayout] = {}
_MAX_LAYOUTS = 8  # value lengths kept (each ~1-2 MB of small objects)


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
    b0 = section[0]
    if b0 < 0x80:
        record_size = b0 >> 1
    elif section[1] < 0x80:
        record_size = ((b0 & 0x7F) | (section[1] << 7)) >> 1
    else:
        return None
    # record_size = 4 (prefix of delta 0) + len(value length varint) + value_size + 1
    for lv_len in (1, 2):
        value_size = record_size - 5 - lv_len
        if 0 <= value_size < MAX_VALUE_SIZE and len(ZIGZAG[value_size]) == lv_len:
            return layout_for(value_size).decode(section, count)
    return None
