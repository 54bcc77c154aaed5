"""`-X key=value` for the client commands: librdkafka's names (kcat's `-X`) and Java's
(Kafka's tools' `--producer-property`, `--consumer-property`) for the same settings.

One table per client role maps every accepted name to one `Setting`: the field of a typed
settings object it fills and the parser that checks its value. `linger.ms` and librdkafka's
`queue.buffering.max.ms` fill the same field, as `compression.type` and `compression.codec`
do. Security properties (`security.protocol`, `sasl.*`, `ssl.*`) are passed through as
strings for ClientSecurity, which checks them. Anything else is refused with the closest
name this command takes (or, when it is the other role's property, saying so).

    security, settings = parse_producer_properties(["linger.ms=20", "compression.codec=lz4"])
    settings.linger_ms, settings.compression_type     # 20, "lz4"
    settings.producer_kwargs()                        # {"linger_ms": 20, ...}: given ones only

    security, settings = parse_consumer_properties(["fetch.wait.max.ms=100",
                                                    "isolation.level=read_committed"])
    settings.consumer_kwargs()   # for client.consumer.Consumer (and GroupConsumer)
    settings.group_kwargs()      # the group-only keywords of GroupConsumer

The same key given twice (or two names of one setting): the later one wins, as in kcat.
Loading this module imports nothing from the client packages, so `--help` stays fast
(partition.assignment.strategy's names are the client's, imported when one is parsed).

`--command-config FILE` (Kafka's tools' --command-config / --producer.config /
--consumer.config) is read by the same tables: a key of the file is checked as the same
-X item would be, the error naming the file; -X overrides the file, and a command's own
flags override both (producer_options, consumer_options). bootstrap.servers of the file
is taken by -b's resolution (kafkactl.cli._client_options.bootstrap_option).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkactl.client.security import ClientSecurity

# The security properties ClientSecurity takes (kafkactl.client.security.SECURITY_KEYS; a
# test keeps the two equal: this module must not import the client for `--help`).
SECURITY_KEYS = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
    "sasl.password", "sasl.jaas.config", "ssl.ca.location", "ssl.certificate.location",
    "ssl.key.location", "ssl.key.password", "ssl.truststore.location",
    "ssl.truststore.type", "enable.ssl.certificate.verification",
    "ssl.endpoint.identification.algorithm", "ssl.keystore.location", "ssl.keystore.type"})


class PropertyError(ValueError):
    """An -X property that cannot be used; the message names it and says why."""


Parser = Callable[[str], Any]


@dataclass(frozen=True)
class Setting:
    """One setting: `names[0]` is Java's name (what Kafka's docs call it), the others are
    librdkafka's (or older Java) names for the same thing; `field` is the attribute of the
    settings object it fills; `parse` turns the text into the value or raises ValueError
    with what is wrong. `applied=False`: accepted and checked, but kafkactl has no such
    knob (`note` says why), so the value changes nothing."""

    names: tuple[str, ...]
    field: str
    parse: Parser
    applied: bool = True
    note: str = ""


# ---------------------------------------------------------------------------- value parsers


def integer(minimum: int = 0, maximum: int | None = None) -> Parser:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError("needs an integer") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
            raise ValueError(f"must be {bound}")
        return value
    return parse


def milliseconds(minimum: int = 0, maximum: int | None = None) -> Parser:
    """Milliseconds as an integer; librdkafka also takes a fraction (`0.5`), kept as float."""
    whole = integer(minimum, maximum)

    def parse(text: str) -> int | float:
        try:
            return whole(text)
        except ValueError:
            try:
                value = float(text.strip())
            except ValueError:
                raise ValueError("needs a number of milliseconds") from None
            if not value >= minimum or (maximum is not None and value > maximum):
                bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
                raise ValueError(f"must be {bound}") from None
            return value
    return parse


def kilobytes(text: str) -> int:
    return integer(1)(text) * 1024


_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def boolean(text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError("must be true or false")


def one_of(choices: Mapping[str, Any]) -> Parser:
    """A choice by name, case-insensitively; `choices` maps each accepted spelling to the
    value (several spellings may name one value)."""
    shown = ", ".join(dict.fromkeys(choices))

    def parse(text: str) -> Any:
        try:
            return choices[text.strip().lower()]
        except KeyError:
            raise ValueError(f"must be one of {shown}") from None
    return parse


def text_value(text: str) -> str:
    value = text.strip()
    if not value:
        raise ValueError("must not be empty")
    return value


ACKS = {"all": "all", "-1": "all", "0": "0", "1": "1"}
COMPRESSION = {name: name for name in ("none", "gzip", "snappy", "lz4", "zstd")}

# librdkafka's partitioner names and Java's partitioner classes -> kafkactl's partitioner
# (kafkactl.client.partitioner): murmur2 is the Java client's, crc32 librdkafka's
# "consistent" one. A module:function (a partitioner of one's own) is passed through.
PARTITIONERS = {
    "murmur2": "murmur2", "murmur2_random": "murmur2",
    "org.apache.kafka.clients.producer.internals.defaultpartitioner": "murmur2",
    "org.apache.kafka.clients.producer.uniformstickypartitioner": "murmur2",
    "crc32": "crc32", "consistent": "crc32", "consistent_random": "consistent_random",
    "fnv1a": "fnv1a", "fnv1a_random": "fnv1a_random",
    "random": "random", "roundrobin": "roundrobin",
    "org.apache.kafka.clients.producer.roundrobinpartitioner": "roundrobin",
}


def partitioner_name(text: str) -> str:
    value = text.strip()
    known = PARTITIONERS.get(value.lower())
    if known is not None:
        return known
    if ":" in value and "." not in value.split(":", 1)[1]:
        return value  # module:function
    raise ValueError("must be murmur2 (murmur2_random), crc32 (consistent), "
                     "consistent_random, fnv1a, fnv1a_random, random, roundrobin, Java's "
                     "DefaultPartitioner, UniformStickyPartitioner or RoundRobinPartitioner, "
                     "or module:function")


AUTO_OFFSET_RESET = {
    "earliest": "earliest", "smallest": "earliest", "beginning": "earliest",
    "latest": "latest", "largest": "latest", "end": "latest",
    "none": "none", "error": "none",
}
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}


def assignors(text: str) -> tuple[str, ...]:
    """librdkafka's assignor names and Java's classes -> kafkactl's group assignors
    (kafkactl.client.group.assignors.ASSIGNOR_NAMES, which the mirror reads too; imported
    here, when the property is given, so that --help loads no client module)."""
    from kafkactl.client.group.assignors import ASSIGNOR_NAMES

    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError("needs range and/or roundrobin")
    out: list[str] = []
    for n in names:
        known = ASSIGNOR_NAMES.get(n.lower())
        if known is None:
            raise ValueError(f"{n}: kafkactl's groups assign with range or roundrobin "
                             "(Java's RangeAssignor, RoundRobinAssignor)")
        if known not in out:
            out.append(known)
    return tuple(out)


# ---------------------------------------------------------------------------- the tables

# Properties every client command takes as a flag of its own, not through -X.
FLAG_ONLY = {"bootstrap.servers": "-b/--bootstrap-server",
             "metadata.broker.list": "-b/--bootstrap-server"}


def _table(*settings: Setting) -> dict[str, Setting]:
    """Every accepted name -> its Setting."""
    out: dict[str, Setting] = {}
    for s in settings:
        for name in s.names:
            assert name not in out, name
            out[name] = s
    return out


_COMMON = (
    Setting(("client.id",), "client_id", text_value),
    Setting(("request.timeout.ms", "socket.timeout.ms"), "request_timeout_ms",
            integer(1)),
)

PRODUCER_TABLE: dict[str, Setting] = _table(
    *_COMMON,
    Setting(("acks", "request.required.acks"), "acks", one_of(ACKS)),
    Setting(("compression.type", "compression.codec"), "compression_type",
            one_of(COMPRESSION)),
    Setting(("linger.ms", "queue.buffering.max.ms"), "linger_ms", milliseconds(0, 900000)),
    Setting(("batch.size",), "batch_size", integer(1)),
    Setting(("batch.num.messages",), "batch_num_messages", integer(1), applied=False,
            note="kafkactl's batches are bounded in bytes (batch.size), not in records"),
    Setting(("buffer.memory",), "buffer_memory", integer(1)),
    Setting(("queue.buffering.max.kbytes",), "buffer_memory", kilobytes),
    Setting(("delivery.timeout.ms", "message.timeout.ms"), "delivery_timeout_ms",
            integer(1)),
    Setting(("max.request.size", "message.max.bytes"), "max_request_size", integer(1000)),
    Setting(("max.block.ms",), "max_block_ms", integer(0)),
    Setting(("enable.idempotence",), "enable_idempotence", boolean),
    Setting(("retries", "message.send.max.retries"), "retries", integer(0)),
    Setting(("retry.backoff.ms",), "retry_backoff_ms", integer(0)),
    Setting(("max.in.flight.requests.per.connection", "max.in.flight"), "max_in_flight",
            integer(1)),
    Setting(("partitioner", "partitioner.class"), "partitioner", partitioner_name),
    Setting(("metadata.max.age.ms",), "metadata_max_age_ms", integer(1)),
    Setting(("transactional.id",), "transactional_id", text_value),
    Setting(("transaction.timeout.ms",), "transaction_timeout_ms", integer(1)),
)

CONSUMER_TABLE: dict[str, Setting] = _table(
    *_COMMON,
    Setting(("fetch.max.wait.ms", "fetch.wait.max.ms"), "fetch_max_wait_ms", integer(0)),
    Setting(("fetch.min.bytes",), "fetch_min_bytes", integer(1)),
    Setting(("fetch.max.bytes",), "fetch_max_bytes", integer(1)),
    Setting(("max.partition.fetch.bytes", "fetch.message.max.bytes"),
            "max_partition_fetch_bytes", integer(1)),
    Setting(("auto.offset.reset",), "auto_offset_reset", one_of(AUTO_OFFSET_RESET)),
    Setting(("isolation.level",), "isolation_level", one_of(ISOLATION_LEVELS)),
    Setting(("check.crcs",), "check_crcs", boolean),
    Setting(("max.poll.records",), "max_poll_records", integer(1)),
    Setting(("metadata.max.age.ms",), "metadata_max_age_ms", integer(1)),
    Setting(("group.id",), "group_id", text_value),
    Setting(("group.instance.id",), "group_instance_id", text_value),
    Setting(("enable.auto.commit",), "enable_auto_commit", boolean),
    Setting(("auto.commit.interval.ms",), "auto_commit_interval_ms", integer(0)),
    Setting(("session.timeout.ms",), "session_timeout_ms", integer(1)),
    Setting(("heartbeat.interval.ms",), "heartbeat_interval_ms", integer(1)),
    Setting(("max.poll.interval.ms",), "max_poll_interval_ms", integer(1)),
    Setting(("partition.assignment.strategy",), "partition_assignment_strategy", assignors),
)


# ---------------------------------------------------------------------------- settings


_META_FIELDS = ("given_as", "from_file", "config_file")


@dataclass
class _Settings:
    """Fields are None unless given; `given_as[field]` is the -X name the user wrote,
    `from_file[field]` the name in --command-config `config_file` of a setting -X did not
    give (a flag may override those; a flag and -X must agree)."""

    given_as: dict[str, str] = field(default_factory=dict, repr=False)
    from_file: dict[str, str] = field(default_factory=dict, repr=False)
    config_file: str = field(default="", repr=False)

    def given(self) -> dict[str, Any]:
        """field -> value of every setting given (by -X or the file)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in _META_FIELDS and getattr(self, f.name) is not None}

    def option(self, name: str) -> str:
        """How the user wrote the setting of field `name`: `-X linger.ms`, or
        `linger.ms (--command-config FILE)`."""
        if name not in self.given_as and name in self.from_file:
            return f"{self.from_file[name]} (--command-config {self.config_file})"
        return f"-X {self.given_as.get(name, name)}"


@dataclass
class ProducerSettings(_Settings):
    """Producer settings from -X; field names are kafkactl.client.producer.Producer's
    keywords (batch_num_messages excepted: accepted, not applied)."""

    client_id: str | None = None
    request_timeout_ms: int | None = None
    acks: str | None = None  # "0", "1" or "all"
    compression_type: str | None = None
    linger_ms: int | float | None = None
    batch_size: int | None = None
    batch_num_messages: int | None = None  # accepted, not applied (see the table)
    buffer_memory: int | None = None
    delivery_timeout_ms: int | None = None
    max_request_size: int | None = None
    max_block_ms: int | None = None
    enable_idempotence: bool | None = None
    retries: int | None = None
    retry_backoff_ms: int | None = None
    max_in_flight: int | None = None
    partitioner: str | None = None
    metadata_max_age_ms: int | None = None
    transactional_id: str | None = None
    transaction_timeout_ms: int | None = None

    def producer_kwargs(self) -> dict[str, Any]:
        """Producer(...) keywords of the settings given."""
        out = self.given()
        out.pop("batch_num_messages", None)
        return out


@dataclass
class ConsumerSettings(_Settings):
    """Consumer settings from -X, typed. consumer_kwargs() are keywords of
    kafkactl.client.consumer.Consumer (GroupConsumer takes them too); group_kwargs() the
    group-only keywords of kafkactl.client.group.consumer.GroupConsumer. group_id is
    in neither: the command decides how it goes with -G."""

    client_id: str | None = None
    request_timeout_ms: int | None = None
    fetch_max_wait_ms: int | None = None
    fetch_min_bytes: int | None = None
    fetch_max_bytes: int | None = None
    max_partition_fetch_bytes: int | None = None
    auto_offset_reset: str | None = None  # "earliest", "latest" or "none"
    isolation_level: int | None = None  # 0 read_uncommitted, 1 read_committed
    check_crcs: bool | None = None
    max_poll_records: int | None = None
    metadata_max_age_ms: int | None = None
    group_id: str | None = None
    group_instance_id: str | None = None
    enable_auto_commit: bool | None = None
    auto_commit_interval_ms: int | None = None
    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    max_poll_interval_ms: int | None = None  # GroupConsumer's rebalance_timeout_ms, as Java
    partition_assignment_strategy: tuple[str, ...] | None = None

    _CONSUMER = ("client_id", "request_timeout_ms", "fetch_max_wait_ms", "fetch_min_bytes",
                 "fetch_max_bytes", "max_partition_fetch_bytes", "auto_offset_reset",
                 "isolation_level", "check_crcs", "max_poll_records", "metadata_max_age_ms")

    def consumer_kwargs(self) -> dict[str, Any]:
        """Consumer(...) keywords of the settings given: client_id, request_timeout_ms,
        fetch_max_wait_ms, fetch_min_bytes, fetch_max_bytes, max_partition_fetch_bytes,
        auto_offset_reset, isolation_level, check_crcs, max_poll_records,
        metadata_max_age_ms."""
        return {k: v for k, v in self.given().items() if k in self._CONSUMER}

    def group_kwargs(self) -> dict[str, Any]:
        """GroupConsumer(...) group keywords of the settings given: group_instance_id,
        enable_auto_commit, auto_commit_interval_ms, session_timeout_ms,
        heartbeat_interval_ms, rebalance_timeout_ms (max.poll.interval.ms), assignors."""
        given = self.given()
        names = ("group_instance_id", "enable_auto_commit", "auto_commit_interval_ms",
                 "session_timeout_ms", "heartbeat_interval_ms")
        out: dict[str, Any] = {k: given[k] for k in names if k in given}
        if "max_poll_interval_ms" in given:
            out["rebalance_timeout_ms"] = given["max_poll_interval_ms"]
        if "partition_assignment_strategy" in given:
            out["assignors"] = given["partition_assignment_strategy"]
        return out


# ---------------------------------------------------------------------------- parsing


def split_key_value(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise PropertyError(f"-X {item!r} must look like key=value")
    return key, value


CLOSE_ENOUGH = 0.75  # difflib's ratio a name must reach to be suggested for a typo


def closest_name(key: str, names: Iterable[str]) -> str | None:
    """The known name nearest to `key`, if it is near enough to be the one meant (difflib's
    ratio >= CLOSE_ENOUGH: `lingr.ms` -> linger.ms, `foo.bar` -> None)."""
    best = difflib.get_close_matches(key, sorted(set(names)), n=1, cutoff=CLOSE_ENOUGH)
    return best[0] if best else None


def unknown_key_hint(key: str, names: Iterable[str],
                     otherwise: str = " (--help lists them)") -> str:
    """`; the closest is NAME` for a near miss, else `otherwise`."""
    near = closest_name(key, names)
    return f"; the closest is {near}" if near else otherwise


def parse_properties(items: Iterable[str], table: Mapping[str, Setting], role: str,
                     other: tuple[str, Mapping[str, Setting]] | None = None,
                     ) -> tuple[dict[str, str], dict[str, Any], dict[str, str]]:
    """(security properties, field -> value, field -> the name given) of `key=value` items
    for a `role` ("producer", "consumer") whose settings are `table`; `other` is the other
    role's (name, table), named in the error for a key that belongs there."""
    return parse_pairs([split_key_value(item) for item in items], table, role, other)


def parse_pairs(pairs: Iterable[tuple[str, str]], table: Mapping[str, Setting], role: str,
                other: tuple[str, Mapping[str, Setting]] | None = None,
                config_file: Path | None = None,
                ) -> tuple[dict[str, str], dict[str, Any], dict[str, str]]:
    """parse_properties of (key, value) pairs: -X's, or with `config_file` the keys of
    that --command-config file (errors name it; bootstrap.servers is left to -b's
    resolution)."""
    where = "-X " if config_file is None else f"--command-config {config_file}: "
    security: dict[str, str] = {}
    values: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key, raw in pairs:
        if key in SECURITY_KEYS:
            security[key] = raw
            continue
        setting = table.get(key)
        if setting is None and key in FLAG_ONLY:
            if config_file is not None:
                continue
            raise PropertyError(f"{where}{key}: give it as {FLAG_ONLY[key]}")
        if setting is None:
            if other is not None and key in other[1]:
                raise PropertyError(f"{where}{key}: a {other[0]} property; {role} settings "
                                    f"are e.g. {', '.join(list(table)[:4])}")
            raise PropertyError(f"{where}{key}: not a {role} property kafkactl knows"
                                + unknown_key_hint(key, [*table, *SECURITY_KEYS]))
        try:
            values[setting.field] = setting.parse(raw)
        except ValueError as e:
            raise PropertyError(f"{where}{key}={raw}: {e}") from None
        given_as[setting.field] = key
    return security, values, given_as


def parse_producer_properties(items: Iterable[str]) -> tuple[dict[str, str], ProducerSettings]:
    """(security properties, ProducerSettings) of -X items; PropertyError for a bad one."""
    security, values, given_as = parse_properties(
        items, PRODUCER_TABLE, "producer", ("consumer", CONSUMER_TABLE))
    return security, ProducerSettings(given_as=given_as, **values)


def parse_consumer_properties(items: Iterable[str]) -> tuple[dict[str, str], ConsumerSettings]:
    """(security properties, ConsumerSettings) of -X items; PropertyError for a bad one."""
    security, values, given_as = parse_properties(
        items, CONSUMER_TABLE, "consumer", ("producer", PRODUCER_TABLE))
    return security, ConsumerSettings(given_as=given_as, **values)


def names_help(table: Mapping[str, Setting]) -> str:
    """The settings of `table` for --help: `linger.ms (queue.buffering.max.ms), ...`."""
    settings = list({id(s): s for s in table.values()}.values())
    return ", ".join(f"{s.names[0]} ({', '.join(s.names[1:])})" if len(s.names) > 1
                     else s.names[0] for s in settings)


# ---------------------------------------------------------------------------- for commands


def _with_command_config(items: list[str], command_config: Path | None,
                         table: Mapping[str, Setting], role: str, other_role: str,
                         other: Mapping[str, Setting],
                         ) -> tuple[dict[str, str], dict[str, Any]]:
    """(security properties, settings keywords) of -X `items` over the keys of
    `command_config`; a one-line error and exit 2 for a bad one, naming where it is."""
    from kafkactl.cli._client_options import fail, read_command_config

    file_pairs = read_command_config(command_config).items()
    try:
        fsecurity, fvalues, fnames = parse_pairs(file_pairs, table, role, (other_role, other),
                                                 config_file=command_config)
        security, values, given_as = parse_properties(items, table, role, (other_role, other))
    except PropertyError as e:
        raise fail(str(e), 2) from None
    keywords: dict[str, Any] = {**fvalues, **values, "given_as": given_as,
                                "from_file": {k: v for k, v in fnames.items()
                                              if k not in given_as},
                                "config_file": str(command_config or "")}
    return {**fsecurity, **security}, keywords


def producer_options(props: list[str], command_config: Path | None,
                     ) -> tuple[ClientSecurity, ProducerSettings]:
    """-X items and --command-config of a producing command: (its ClientSecurity, its
    ProducerSettings: the file's settings overlaid by -X's; `given_as` names only -X's),
    or a one-line error and exit 2."""
    from kafkactl.cli._client_options import security_of

    security, keywords = _with_command_config(props, command_config, PRODUCER_TABLE,
                                              "producer", "consumer", CONSUMER_TABLE)
    return security_of(security), ProducerSettings(**keywords)


def consumer_options(props: list[str], command_config: Path | None,
                     ) -> tuple[ClientSecurity, ConsumerSettings]:
    """-X items and --command-config of a consuming command: (its ClientSecurity, its
    ConsumerSettings: the file's settings overlaid by -X's; `given_as` names only -X's),
    or a one-line error and exit 2."""
    from kafkactl.cli._client_options import security_of

    security, keywords = _with_command_config(props, command_config, CONSUMER_TABLE,
                                              "consumer", "producer", PRODUCER_TABLE)
    return security_of(security), ConsumerSettings(**keywords)
