"""The data source's options, named as Spark's own Kafka connector names them.

Spark's connector ignores option names it does not know (a typo in `startingOfsets` silently
reads from the default); here every name is checked and an unknown one is refused with the
list of known ones. Plain Python: no pyspark import, so the loader and the tests use it too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkactl.client.fetcher import EARLIEST, LATEST
from kafkactl.client.producer import PROPERTY_NAMES
from kafkactl.client.security import SECURITY_KEYS, ClientSecurity, SecurityConfigError

TopicPartition = tuple[str, int]

# The client's security, `kafka.`-prefixed as Spark's connector passes Kafka properties on:
# kafka.security.protocol, kafka.sasl.mechanism, kafka.sasl.jaas.config, kafka.ssl.*...
SECURITY_OPTIONS = tuple(f"kafka.{k}" for k in sorted(SECURITY_KEYS))
READ_OPTIONS = (
    "kafka.bootstrap.servers", "bootstrap", "subscribe", "subscribePattern", "assign",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "failOnDataLoss", "maxRecordsPerPartition", "includeHeaders",
    "kafkaConsumer.pollTimeoutMs",
) + SECURITY_OPTIONS
STREAM_OPTIONS = READ_OPTIONS + ("maxOffsetsPerTrigger",)
# The writer takes `topic` and Kafka producer properties prefixed `kafka.`, as Spark's does.
WRITE_OPTIONS = ("kafka.bootstrap.servers", "bootstrap", "topic", "includeHeaders") + tuple(
    f"kafka.{p}" for p in sorted(PROPERTY_NAMES) if p != "bootstrap.servers") + SECURITY_OPTIONS


class OptionError(ValueError):
    """A data source option is unknown, missing or malformed."""


class DataLossError(Exception):
    """Requested offsets are no longer (or not yet) in the log and failOnDataLoss=true."""


def canonical_options(options: Mapping[str, str], known: tuple[str, ...]) -> dict[str, str]:
    """Case-insensitive option names -> their canonical spelling; unknown names refused."""
    by_lower = {k.lower(): k for k in known}
    out: dict[str, str] = {}
    unknown = []
    for k, v in options.items():
        if k.lower() == "path" and not v:
            continue
        name = by_lower.get(k.lower())
        if name is None:
            unknown.append(k)
        else:
            out[name] = v
    if unknown:
        raise OptionError(
            f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
            f"for format kafkactl; known options: {', '.join(known)}")
    return out


def parse_bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise OptionError(f"option {name} must be true or false (got {value!r})")


def parse_positive_int(name: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise OptionError(f"option {name} must be an integer (got {value!r})") from None
    if n <= 0:
        raise OptionError(f"option {name} must be > 0 (got {n})")
    return n


def parse_partition_json(name: str, value: str, *, values: bool) -> dict[TopicPartition, int]:
    """`{"t":{"0":23,"1":-2}}` (values=True) or `{"t":[0,1]}` (assign) -> {(t, p): offset}."""
    try:
        doc = json.loads(value)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name} is not valid JSON ({e.msg}): {value!r}") from None
    shape = '{"topic":{"0":23,"1":-2}}' if values else '{"topic":[0,1]}'
    if not isinstance(doc, dict):
        raise OptionError(f"option {name} must be a JSON object like {shape}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in doc.items():
        items = (parts.items() if isinstance(parts, dict) else None) if values else (
            [(p, 0) for p in parts] if isinstance(parts, list) else None)
        if items is None:
            raise OptionError(f"option {name}: topic {topic!r} must map to "
                              f"{'an object of partition: offset' if values else 'a list'}"
                              f" (like {shape})")
        for p, off in items:
            try:
                pi = int(p)
            except (TypeError, ValueError):
                raise OptionError(f"option {name}: partition {p!r} of {topic!r} is not an "
                                  "integer") from None
            if not isinstance(off, int) or isinstance(off, bool) or off < -2:
                raise OptionError(f"option {name}: offset {off!r} of {topic}-{pi} must be an "
                                  "integer >= 0, -2 (earliest) or -1 (latest)")
            out[(topic, pi)] = off
    return out


@dataclass
class ReadOptions:
    """Validated reader options (picklable: they travel to the executors)."""

    bootstrap: str
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: int | dict[TopicPartition, int] = EARLIEST   # EARLIEST, LATEST or per partition
    ending: int | dict[TopicPartition, int] = LATEST
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    fail_on_data_loss: bool = True
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    poll_timeout_ms: int = 120000
    raw: dict[str, str] = field(default_factory=dict)
    # security properties as text (an SSLContext does not pickle); built where they are used
    security_properties: dict[str, str] = field(default_factory=dict)

    def client_security(self) -> ClientSecurity:
        return security_from(self.security_properties)


def security_from(props: dict[str, str]) -> ClientSecurity:
    """The ClientSecurity of un-prefixed security properties; OptionError names a bad one."""
    try:
        return ClientSecurity.from_properties(props)
    except SecurityConfigError as e:
        raise OptionError(f"option kafka.{e}") from None


def _offsets(name: str, value: str | None, default: int) -> int | dict[TopicPartition, int]:
    if value is None:
        return default
    v = value.strip()
    if v.lower() == "earliest":
        return EARLIEST
    if v.lower() == "latest":
        return LATEST
    return parse_partition_json(name, v, values=True)


def _timestamp(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        ts = int(value)
    except ValueError:
        raise OptionError(f"option {name} must be milliseconds since the epoch "
                          f"(got {value!r})") from None
    if ts < 0:
        raise OptionError(f"option {name} must be >= 0 (got {ts})")
    return ts


# C901: one check per Spark Kafka source option, as documented
def parse_read_options(  # noqa: C901
        options: Mapping[str, str], *, streaming: bool = False) -> ReadOptions:
    opts = canonical_options(options, STREAM_OPTIONS if streaming else READ_OPTIONS)
    bootstrap = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap")
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers (or bootstrap) is required, "
                          "e.g. .option('kafka.bootstrap.servers', '127.0.0.1:9092')")
    given = [k for k in ("subscribe", "subscribePattern", "assign") if opts.get(k)]
    if len(given) != 1:
        raise OptionError("exactly one of the options subscribe, subscribePattern, assign "
                          f"must be given (got {', '.join(given) or 'none'})")
    ro = ReadOptions(bootstrap=bootstrap, raw=opts, security_properties={
        k[len("kafka."):]: v for k, v in opts.items() if k in SECURITY_OPTIONS})
    ro.client_security()  # a bad one fails on the driver
    if "subscribe" in opts:
        ro.subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not ro.subscribe:
            raise OptionError("option subscribe needs topic names: 'a,b'")
    elif "subscribePattern" in opts:
        ro.pattern = opts["subscribePattern"]
        import re
        try:
            re.compile(ro.pattern)
        except re.error as e:
            raise OptionError(f"option subscribePattern is not a valid regex: {e}") from None
    else:
        ro.assign = tuple(sorted(parse_partition_json("assign", opts["assign"], values=False)))
    ro.starting = _offsets("startingOffsets", opts.get("startingOffsets"),
                           LATEST if streaming else EARLIEST)
    ro.ending = _offsets("endingOffsets", opts.get("endingOffsets"), LATEST)
    if streaming and "endingOffsets" in opts:
        raise OptionError("option endingOffsets is for batch queries only")
    if not streaming:
        if ro.starting == LATEST or (isinstance(ro.starting, dict)
                                     and LATEST in ro.starting.values()):
            raise OptionError("startingOffsets latest (-1) is not allowed in a batch query")
        if ro.ending == EARLIEST or (isinstance(ro.ending, dict)
                                     and EARLIEST in ro.ending.values()):
            raise OptionError("endingOffsets earliest (-2) is not allowed in a batch query")
    ro.starting_timestamp = _timestamp("startingTimestamp", opts.get("startingTimestamp"))
    ro.ending_timestamp = _timestamp("endingTimestamp", opts.get("endingTimestamp"))
    if "failOnDataLoss" in opts:
        ro.fail_on_data_loss = parse_bool("failOnDataLoss", opts["failOnDataLoss"])
    if "maxRecordsPerPartition" in opts:
        ro.max_records_per_partition = parse_positive_int(
            "maxRecordsPerPartition", opts["maxRecordsPerPartition"])
    if "maxOffsetsPerTrigger" in opts:
        ro.max_offsets_per_trigger = parse_positive_int(
            "maxOffsetsPerTrigger", opts["maxOffsetsPerTrigger"])
    if "kafkaConsumer.pollTimeoutMs" in opts:
        ro.poll_timeout_ms = parse_positive_int("kafkaConsumer.pollTimeoutMs",
                                                opts["kafkaConsumer.pollTimeoutMs"])
    if "includeHeaders" in opts and not parse_bool("includeHeaders", opts["includeHeaders"]):
        raise OptionError("includeHeaders=false is not supported: the headers column is "
                          "always part of the kafkactl schema")
    return ro
