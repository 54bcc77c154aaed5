"""The compiled batch validation (kafkactl/log/_log_kernels.pyx) against its reference,
log/validator.py's `validate_batches_py`, on the same inputs: batches of every shape a
producer sends (keys, headers, producer ids, transactional, compressed, several batches),
each config the validator reads at its limits (max.message.bytes one below / at / one
above the batch, compacted topics, timestamp checks), and malformed bytes (flipped, cut,
padded, lying lengths, bad CRC). `validate_batches` (what the broker calls) must give the
same batches, or raise the same error class with the same message, code and record errors.

Under KAFKACTL_NO_EXTENSIONS=1 the comparisons still run (both sides are the reference)
and the switch is checked; otherwise the kernel must have loaded."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.log import validator
from kafkactl.log.kernels import REASON, log_kernels
from kafkactl.log.validator import BatchValidationError, validate_batches_py
from kafkactl.record.batch_header import RECORDS_OFFSET
from kafkactl.record.builder import RecordBatchBuilder
from kafkactl.record.codecs import Compression
from tests.hypothesis_profiles import examples

TS = 1_700_000_000_000
LONG_MAX = 2**63 - 1


def test_the_switch_picks_the_twin_unless_told_not_to() -> None:
    if os.environ.get("KAFKACTL_NO_EXTENSIONS", "") not in ("", "0"):
        assert log_kernels is None and REASON == "KAFKACTL_NO_EXTENSIONS is set"
        assert validator.validate_batches is validate_batches_py
        return
    assert log_kernels is not None, REASON  # scripts/test.sh builds the extension
    assert isinstance(getattr(validator.validate_batches, "__self__", None),
                      log_kernels.BatchValidator)


def _outcome(buf: bytearray, **config: Any) -> Any:
    try:
        return "ok", validator.validate_batches(memoryview(buf), **config)
    except BatchValidationError as e:
        return type(e), str(e), e.code, e.record_errors
    except Exception as e:  # noqa: BLE001 - the class and the message are what is compared
        return type(e), str(e)


def _reference(buf: bytearray, **config: Any) -> Any:
    try:
        return "ok", validate_batches_py(memoryview(buf), **config)
    except BatchValidationError as e:
        return type(e), str(e), e.code, e.record_errors
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)


def _same(buf: bytearray, **config: Any) -> Any:
    expected = _reference(bytearray(buf), **config)
    assert _outcome(bytearray(buf), **config) == expected
    return expected


def _config(size: int, **over: Any) -> dict[str, Any]:
    config = {"max_message_bytes": 1 << 20, "timestamp_type": "CreateTime",
              "max_timestamp_difference_ms": LONG_MAX, "now_ms": TS, "produce_version": 9,
              "single_batch": True, "compacted": False, "topic_partition": "t-0"}
    config.update(over)
    return config


_record = st.tuples(st.none() | st.binary(max_size=8), st.none() | st.binary(max_size=40),
                    st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=4)),
                             max_size=2))


@st.composite
def _batch(draw: st.DrawFn) -> bytes:
    pid = draw(st.sampled_from([-1, 0, 7, 2**62]))
    transactional = pid >= 0 and draw(st.booleans())
    b = RecordBatchBuilder(
        compression=draw(st.sampled_from([Compression.NONE] * 4 + [Compression.GZIP])),
        producer_id=pid, producer_epoch=draw(st.sampled_from([-1, 0, 3])) if pid >= 0 else -1,
        base_sequence=draw(st.sampled_from([-1, 0, 2**31 - 1])) if pid >= 0 else -1,
        is_transactional=transactional)
    for key, value, headers in draw(st.lists(_record, min_size=1, max_size=5)):
        b.append(draw(st.sampled_from([TS, TS - 5000, 0, -1])), key, value, headers)
    return b.build()


@settings(max_examples=examples(400))
@given(st.lists(_batch(), min_size=1, max_size=2), st.data())
def test_twins_agree(batches: list[bytes], data: st.DataObject) -> None:
    buf = bytearray(b"".join(batches))
    size = len(batches[0])
    config = _config(size,
                     max_message_bytes=data.draw(st.sampled_from([size - 1, size, size + 1,
                                                                  1 << 20])),
                     compacted=data.draw(st.booleans()),
                     produce_version=data.draw(st.sampled_from([2, 3, 6, 7, 9])),
                     single_batch=data.draw(st.booleans()),
                     timestamp_type=data.draw(st.sampled_from(["CreateTime",
                                                               "LogAppendTime"])),
                     max_timestamp_difference_ms=data.draw(st.sampled_from([LONG_MAX, 1000,
                                                                            LONG_MAX - 1])))
    _same(buf, **config)


@settings(max_examples=examples(400))
@given(_batch(), st.data())
def test_twins_agree_on_malformed_batches(batch: bytes, data: st.DataObject) -> None:
    buf = bytearray(batch)
    kind = data.draw(st.sampled_from(["cut", "flip", "pad", "set", "recrc"]))
    at = data.draw(st.integers(0, len(buf) - 1))
    if kind == "cut":
        buf = buf[:at]
    elif kind == "flip":
        buf[at] ^= data.draw(st.integers(1, 255))
    elif kind == "pad":
        buf += data.draw(st.binary(min_size=1, max_size=70))
    elif kind == "set":  # a lying length, count, delta, magic, attribute
        buf[at] = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
    else:  # a change in the records section with a CRC that matches it
        at = data.draw(st.integers(RECORDS_OFFSET, len(buf) - 1))
        buf[at] ^= data.draw(st.integers(1, 255))
        _fix_crc(buf)
    _same(buf, **_config(len(buf), compacted=data.draw(st.booleans())))


def _fix_crc(buf: bytearray) -> None:
    from kafkactl.record.crc import crc32c

    buf[17:21] = crc32c(bytes(buf[21:])).to_bytes(4, "big")


@pytest.mark.parametrize("version", [2, 3, 9])
def test_twins_agree_on_edges(version: int) -> None:
    """Control and transactional flags without a producer id, a null key on a compacted
    topic, a renumbered batch, an empty buffer, a producer id with no sequence."""
    plain = RecordBatchBuilder()
    plain.append(TS, None, b"v")
    cases = [bytearray(plain.build()), bytearray()]
    control = RecordBatchBuilder(producer_id=1, producer_epoch=0, base_sequence=0,
                                 is_control=True)
    control.append(TS, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")
    cases.append(bytearray(control.build()))
    no_seq = RecordBatchBuilder(producer_id=1, producer_epoch=0, base_sequence=-1)
    no_seq.append(TS, b"k", b"v")
    cases.append(bytearray(no_seq.build()))
    gap = RecordBatchBuilder()
    gap.append_at(0, TS, b"k", b"a")
    gap.append_at(2, TS, b"k", b"b")
    cases.append(bytearray(gap.build()))
    txn = bytearray(plain.build())
    txn[22] |= 0x10  # transactional, no producer id
    _fix_crc(txn)
    cases.append(txn)
    for buf in cases:
        for compacted in (False, True):
            _same(buf, **_config(len(buf), compacted=compacted, produce_version=version))
    expected = _same(cases[0], **_config(len(cases[0])))
    assert expected[0] == "ok" and expected[1][0].size == len(cases[0])


def test_twin_survives_random_bytes() -> None:
    """Random bytes behind a plausible header, every truncation of a valid batch: the
    same answer as the reference, and a batch inside a bigger buffer is read only
    inside its view."""
    rng = random.Random(33)
    b = RecordBatchBuilder()
    for i in range(20):
        b.append(TS, b"k%d" % i if i % 3 else None, b"v" * (i * 7))
    valid = b.build()
    cases = [bytearray(valid[:k]) for k in range(len(valid) + 1)]
    for _ in range(1500):
        noise = bytearray(valid[:RECORDS_OFFSET] + rng.randbytes(rng.randrange(120)))
        noise[8:12] = (len(noise) - 12).to_bytes(4, "big")
        _fix_crc(noise)
        cases.append(noise)
    for buf in cases:
        _same(buf, **_config(len(buf)))
        if log_kernels is not None and len(buf) >= RECORDS_OFFSET:
            padded = bytearray(buf + b"\x00" * 64)
            inside = memoryview(padded)[:len(buf)]
            try:
                got: Any = validator.validate_batches(inside, **_config(len(buf)))
            except BatchValidationError as e:
                got = str(e)
            assert got == _reference(buf, **_config(len(buf)))[1]


def test_the_twin_answers_a_plain_batch_itself() -> None:
    """One uncompressed batch, with and without a producer id, on a compacted topic too:
    the twin's own answer (its reference here fails the test if asked)."""
    if log_kernels is None:
        pytest.skip(f"pure Python: {REASON}")
    from kafkactl.record._accel import kernels
    from kafkactl.record.crc import crc32c
    from kafkactl.record.framing import check_records

    def refuse(*_args: object, **_kwargs: object) -> list[Any]:
        raise AssertionError("the twin declined a plain batch")

    for prove in (None if kernels is None else kernels.prove, None):
        twin = log_kernels.BatchValidator(refuse, validator.BatchInfo, check_records, prove,
                                          crc32c).validate
        for pid in (-1, 5):
            b = RecordBatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                   base_sequence=0 if pid >= 0 else -1)
            b.append(TS, b"k", b"v")
            b.append(TS + 1, b"k2", b"v2", [("h", b"x")])
            buf = bytearray(b.build())
            for compacted in (False, True):
                config = _config(len(buf), compacted=compacted)
                assert twin(memoryview(buf), **config) == \
                    validate_batches_py(memoryview(bytearray(buf)), **config)
