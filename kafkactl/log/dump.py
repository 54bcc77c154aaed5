"""Kafka's DumpLogSegments (`kafkactl dump-log`), same line formats (notes section 5).

.log files print one batch line per batch (and with --deep-iteration one `| offset: ...`
line per record); .index / .timeindex print their entries and check them against the .log;
.snapshot prints producer state. Bytes after the last whole batch are reported as
"Found N invalid bytes at the end of <name>". `--json` prints one JSON object per line.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkactl.log.dump_index import dump_offset_index, dump_time_index
from kafkactl.log.dump_output import INT32_MAX, Options, Output
from kafkactl.log.dump_output import close_file as _close
from kafkactl.log.dump_output import read_file as _read_file
from kafkactl.log.errors import CorruptIndexError
from kafkactl.log.offsets_decoder import decode_offsets_record
from kafkactl.log.producer_snapshot import (
    iter_snapshot_entries,
    read_snapshot_header,
    snapshot_problem,
)
from kafkactl.log.txn_log_decoder import decode_txn_log_record
from kafkactl.record.batch import Record, RecordBatch, TimestampType
from kafkactl.record.errors import RecordError
from kafkactl.record.legacy import LegacyBatch, LegacyMessage
from kafkactl.record.memory_records import AnyBatch, iter_batches

__all__ = ["INT32_MAX", "Options", "Output", "dump_files"]


def _jbool(b: bool) -> str:
    return "true" if b else "false"


def _text(b: memoryview | None) -> str:
    return "" if b is None else bytes(b).decode("utf-8", errors="replace")


class DecoderError(ValueError):
    """A key or payload too short for --key-decoder-class / --value-decoder-class
    (IntegerDecoder, LongDecoder: Kafka's tool dies with a BufferUnderflowException)."""


_NUMBER_DECODERS = {"integer": (">i", "IntegerDecoder"), "long": (">q", "LongDecoder")}


def _decode(kind: str, b: memoryview, what: str, offset: int) -> str | int:
    """A key or payload as the Kafka decoder `kind` (a KAFKA_DECODERS value) turns it into
    the object DumpLogSegments prints."""
    if kind == "string":
        return _text(b)
    if kind == "bytes":
        return bytes(b).hex()
    fmt, name = _NUMBER_DECODERS[kind]
    need = struct.calcsize(fmt)
    if len(b) < need:
        raise DecoderError(f"the {what} of the record at offset {offset} is {len(b)} "
                           f"byte(s), {name} reads {need}")
    value: int = struct.unpack_from(fmt, b)[0]
    return value


def _base_offset(path: Path) -> int:
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else 0


# ---------------------------------------------------------------- .log

def _batch_line(batch: AnyBatch, position: int) -> tuple[str, dict[str, Any]]:
    ts_type = batch.timestamp_type
    valid = batch.is_valid()
    obj: dict[str, Any] = {"type": "batch", "position": position}
    if isinstance(batch, RecordBatch):
        dh = batch.delete_horizon_ms
        dh_text = "OptionalLong.empty" if dh is None else f"OptionalLong[{dh}]"
        head = (
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
            f"count: {batch.record_count} baseSequence: {batch.base_sequence} "
            f"lastSequence: {batch.last_sequence} producerId: {batch.producer_id} "
            f"producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {_jbool(batch.is_transactional)} "
            f"isControl: {_jbool(batch.is_control)} deleteHorizonMs: {dh_text}"
        )
        obj.update(
            base_offset=batch.base_offset, last_offset=batch.last_offset,
            count=batch.record_count, base_sequence=batch.base_sequence,
            last_sequence=batch.last_sequence, producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            partition_leader_epoch=batch.partition_leader_epoch,
            is_transactional=batch.is_transactional, is_control=batch.is_control,
            delete_horizon_ms=dh,
        )
    else:
        head = f"offset: {batch.last_offset}"
        obj.update(offset=batch.last_offset)
    text = (
        f"{head} position: {position} {ts_type.java_name}: {batch.max_timestamp} "
        f"size: {batch.size} magic: {batch.magic} "
        f"compresscodec: {batch.compression.java_name} crc: {batch.crc} "
        f"isvalid: {_jbool(valid)}"
    )
    obj.update(
        timestamp_type=ts_type.java_name, max_timestamp=batch.max_timestamp, size=batch.size,
        magic=batch.magic, compresscodec=batch.compression.java_name, crc=batch.crc,
        isvalid=valid,
    )
    return text, obj


def _control_text(rec: Record) -> tuple[str, dict[str, Any]]:
    key = bytes(rec.key) if rec.key is not None else b""
    if len(key) < 4:
        return " controlType: UNKNOWN(-1)", {"control_type": "UNKNOWN"}
    (type_id,) = struct.unpack_from(">h", key, 2)
    if type_id in (0, 1):
        name = "ABORT" if type_id == 0 else "COMMIT"
        value = bytes(rec.value) if rec.value is not None else b""
        epoch = struct.unpack_from(">i", value, 2)[0] if len(value) >= 6 else -1
        return (f" endTxnMarker: {name} coordinatorEpoch: {epoch}",
                {"end_txn_marker": name, "coordinator_epoch": epoch})
    names = {2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
             5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
    name = names.get(type_id, "UNKNOWN")
    return f" controlType: {name}({type_id})", {"control_type": name}


def _record_lines(
    batch: AnyBatch, opts: Options
) -> list[tuple[str, dict[str, Any], int]]:
    lines: list[tuple[str, dict[str, Any], int]] = []
    ts_name = batch.timestamp_type.java_name
    pairs: list[tuple[Record, LegacyMessage | None]]
    if isinstance(batch, LegacyBatch):
        wrapper = batch.entry.message
        log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
        pairs = [
            (Record(off, wrapper.timestamp if log_append else m.timestamp, m.key, m.value,
                    [], m.attributes), m)
            for off, m in batch.iter_messages()
        ]
    else:
        pairs = [(r, None) for r in batch]
    for rec, legacy in pairs:
        obj: dict[str, Any] = {"type": "record", "offset": rec.offset}
        prefix = "| "
        text = ""
        if not opts.skip_metadata:
            ks = -1 if rec.key is None else len(rec.key)
            vs = -1 if rec.value is None else len(rec.value)
            text = (f"{prefix}offset: {rec.offset} {ts_name}: {rec.timestamp} "
                    f"keySize: {ks} valueSize: {vs}")
            obj.update(timestamp_type=ts_name, timestamp=rec.timestamp, key_size=ks,
                       value_size=vs)
            prefix = " "
            if isinstance(batch, RecordBatch):
                seq = -1 if batch.base_sequence == -1 else (
                    (batch.base_sequence + rec.offset - batch.base_offset) & 0x7FFFFFFF)
                hkeys = [k for k, _v in rec.headers]
                text += f" sequence: {seq} headerKeys: [{','.join(hkeys)}]"
                obj.update(sequence=seq, header_keys=hkeys)
            if legacy is not None:
                valid = legacy.is_valid()
                text += f" isValid: {_jbool(valid)} crc: {legacy.crc}}}"
                obj.update(is_valid=valid, crc=legacy.crc)
            if isinstance(batch, RecordBatch) and batch.is_control:
                ctext, cobj = _control_text(rec)
                text += ctext
                obj.update(cobj)
        if opts.print_data and not (isinstance(batch, RecordBatch) and batch.is_control):
            if opts.offsets_decoder or opts.txn_log_decoder:
                decode = decode_offsets_record if opts.offsets_decoder \
                    else decode_txn_log_record
                ktext, ptext, decoded = decode(rec.offset, rec.key, rec.value)
                if ktext is not None:
                    text += f"{prefix}key: {ktext}"
                if ptext is not None:
                    text += f" payload: {ptext}"
                obj.update(decoded)
            else:
                if rec.key is not None:
                    key = _decode(opts.key_decoder, rec.key, "key", rec.offset)
                    text += f"{prefix}key: {key}"
                    obj["key"] = key
                if rec.value is not None:
                    payload = _decode(opts.value_decoder, rec.value, "payload", rec.offset)
                    text += f" payload: {payload}"
                    obj["payload"] = payload
        lines.append((text, obj, rec.offset))
    return lines


def dump_log(path: Path, opts: Options, out: Output) -> bool:
    """Returns False when corrupt data was found."""
    data = _read_file(path)
    base = _base_offset(path)
    out.line(f"Log starting offset: {base}", {"type": "log", "starting_offset": base})
    try:
        total = len(data)
        view = memoryview(data)[: min(total, opts.max_bytes)]
        valid_bytes = 0
        last_offset = -1
        gaps: list[tuple[int, int]] = []
        ok = True
        problem: str | None = None
        try:
            for batch in iter_batches(view):
                text, obj = _batch_line(batch, valid_bytes)
                out.line(text, obj)
                ok = ok and bool(obj["isvalid"])
                if opts.deep:
                    try:
                        lines = _record_lines(batch, opts)
                    except RecordError as e:
                        lines = []
                        ok = False
                        out.error(
                            f"Could not read the records of the batch at position "
                            f"{valid_bytes}: {e}",
                            {"type": "error", "position": valid_bytes, "message": str(e)},
                        )
                    for text, obj, off in lines:
                        if last_offset != -1 and off != last_offset + 1:
                            gaps.append((last_offset, off))
                        last_offset = off
                        out.line(text, obj)
                valid_bytes += batch.size
        except RecordError as e:
            problem = str(e)
        trailing = len(view) - valid_bytes
        if trailing > 0 and opts.max_bytes == INT32_MAX:
            ok = False
            out.line(
                f"Found {trailing} invalid bytes at the end of {path.name}",
                {"type": "invalid_bytes", "count": trailing, "position": valid_bytes,
                 "file": path.name, "reason": problem or "truncated batch"},
            )
        if gaps:
            out.error(f"Non-consecutive offsets in {path.resolve()}",
                      {"type": "non_consecutive_offsets", "file": str(path.resolve()),
                       "pairs": gaps})
            if not opts.as_json:
                # DumpLogSegments prepends each pair to a list: the last one prints first
                for a, b in reversed(gaps):
                    out.err(f"  {a} is followed by {b}")
        return ok
    finally:
        _close(data)


# ---------------------------------------------------------------- .snapshot

def dump_producer_snapshot(path: Path, opts: Options, out: Output) -> bool:
    data = path.read_bytes()
    header = read_snapshot_header(data)
    if header is None:
        out.error(f"Producer snapshot {path} is truncated ({len(data)} bytes).",
                  {"type": "error", "file": str(path), "message": "truncated"})
        return False
    problem = snapshot_problem(data) if not header.is_valid else None
    if problem is not None and problem.startswith("truncated"):
        out.error(f"Producer snapshot {path} is {problem}.",
                  {"type": "error", "file": str(path), "message": "truncated"})
        return False
    if not header.is_valid:
        out.error(f"Producer snapshot {path} is corrupt: version {header.version}, stored crc "
                  f"{header.crc}, computed crc {header.computed_crc}.",
                  {"type": "error", "file": str(path), "message": "bad crc or version"})
        return False
    for (pid, epoch, last_seq, last_off, delta, ts, coord_epoch,
         txn_first) in iter_snapshot_entries(data, header.entry_count):
        txn = "OptionalLong.empty" if txn_first < 0 else f"OptionalLong[{txn_first}]"
        text = (f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord_epoch} "
                f"currentTxnFirstOffset: {txn} lastTimestamp: {ts}")
        obj: dict[str, Any] = {
            "type": "producer", "producer_id": pid, "producer_epoch": epoch,
            "coordinator_epoch": coord_epoch,
            "current_txn_first_offset": None if txn_first < 0 else txn_first,
            "last_timestamp": ts,
        }
        if last_off >= 0:
            first_seq = last_seq - delta if last_seq - delta >= 0 else last_seq - delta + 2**31
            text += (f" firstSequence: {first_seq} lastSequence: {last_seq} "
                     f"lastOffset: {last_off} offsetDelta: {delta} timestamp: {ts}")
            obj.update(first_sequence=first_seq, last_sequence=last_seq, last_offset=last_off,
                       offset_delta=delta, timestamp=ts)
        out.line(text, obj)
    return True


# ---------------------------------------------------------------- .txnindex

def dump_txn_index(path: Path, opts: Options, out: Output) -> bool:
    """DumpLogSegments' dumpTxnIndex: one line per aborted transaction. An entry with
    another version than 0 ends the dump as Kafka's reader ends it ("Unexpected aborted
    transaction version N in transaction index F, current version is 0", naming the entry
    and the bytes left unread), a truncated last entry is "Found N invalid bytes at the
    end of F"; entries that do not fit the segment (kafkactl.log.txn_index.entry_problems)
    go to stderr too."""
    from kafkactl.log.abstract_index import base_offset_from_path
    from kafkactl.log.txn_index import ENTRY_SIZE, TXN_INDEX_VERSION, entry_problems, scan_entries

    data = path.read_bytes()
    entries, damage = scan_entries(data)
    for e in entries:
        out.line(e.describe(), {"type": "aborted_txn", "version": 0,
                                "producer_id": e.producer_id, "first_offset": e.first_offset,
                                "last_offset": e.last_offset,
                                "last_stable_offset": e.last_stable_offset})
    ok = damage is None
    if damage is not None and damage.version is not None:
        after, rest = divmod(damage.trailing - ENTRY_SIZE, ENTRY_SIZE)
        unread = f"{after} entr{'y' if after == 1 else 'ies'}" + (
            f" and {rest} byte(s)" if rest else "")
        out.error(f"Unexpected aborted transaction version {damage.version} in transaction "
                  f"index {path.resolve()}, current version is {TXN_INDEX_VERSION}: entry "
                  f"{damage.entry} (at byte {damage.position}); it and the {unread} after it "
                  "are not printed",
                  {"type": "unexpected_version", "file": path.name, "entry": damage.entry,
                   "position": damage.position, "version": damage.version,
                   "bytes_not_read": damage.trailing})
    elif damage is not None:
        out.error(f"Found {damage.trailing} invalid bytes at the end of {path.name} (not a "
                  f"whole {ENTRY_SIZE}-byte entry: the file is truncated)",
                  {"type": "invalid_bytes", "count": damage.trailing,
                   "position": damage.position, "file": path.name})
    for problem in entry_problems(entries, base_offset_from_path(path)):
        ok = False
        out.error(f"Corrupt transaction index {path.name}: {problem}",
                  {"type": "index_problem", "file": str(path), "message": problem})
    return ok


# ---------------------------------------------------------------- command

_DUMPERS: dict[str, Callable[[Path, Options, Output], bool]] = {
    ".log": dump_log,
    ".index": dump_offset_index,
    ".timeindex": dump_time_index,
    ".snapshot": dump_producer_snapshot,
    ".txnindex": dump_txn_index,
}


def dump_files(paths: list[Path], opts: Options, out: Output) -> int:
    """Dump each file; returns the exit code (0 ok, 1 corrupt data found, 2 bad input)."""
    code = 0
    for path in paths:
        dumper = _DUMPERS.get(path.suffix)
        if dumper is None:
            if not opts.as_json:
                # DumpLogSegments prints it for every file, then the note; not counted as
                # a file dumped (Output.line would count it)
                out.out(f"Dumping {path}")
            out.error(f"Ignoring unknown file {path}",
                      {"type": "ignored", "file": str(path)})
            continue
        out.line(f"Dumping {path}", {"type": "file", "file": str(path)})
        try:
            if not dumper(path, opts, out):
                code = max(code, 1)
        except FileNotFoundError as e:
            out.error(f"Cannot dump {path}: file not found ({e.filename}).",
                      {"type": "error", "file": str(path), "message": "file not found"})
            code = 2
        except CorruptIndexError as e:  # a damaged index: damage found, not a bad argument
            out.error(f"Cannot dump {path}: {e}",
                      {"type": "error", "file": str(path), "message": str(e)})
            code = max(code, 1)
        except Exception as e:  # never a traceback at the CLI edge: one clear sentence
            # OSError (permissions, mmap), RecordError, DecoderError
            out.error(f"Cannot dump {path}: {e}",
                      {"type": "error", "file": str(path), "message": str(e)})
            code = 2
    return code
