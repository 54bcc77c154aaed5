"""`kafkactl configs describe|alter` (kafka-configs, through the protocol).

Topic configs, dynamic broker configs (KIP-226) and a broker's logger levels (KIP-412),
with kafka-configs' flags: `--entity-type topics|brokers|broker-loggers` with
`--entity-name NAME` or `--entity-default` (the cluster-wide broker default), or the
shorthands `--topic`, `--broker`, `--broker-defaults`;
`--add-config 'k1=v1,k2=[a,b]'` and `--delete-config 'k1,k2'`; `--all` to describe every
config, not only the dynamic ones. As kafka-configs, `--delete-config` takes only keys set
on the entity itself (a topic's overrides, a broker's or the cluster default's dynamic
configs): any other key is "Invalid config(s): k1,k2", and nothing is changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    client_security,
    command_config_option,
    fail,
    property_option,
)

if TYPE_CHECKING:
    from kafkactl.client.admin import AdminClient, ConfigEntry

configs_app = typer.Typer(help="Describe and alter topic and broker configs (kafka-configs).",
                          no_args_is_help=True)

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
           3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
           6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
ENTITY_TYPES = {"topics": TOPIC, "brokers": BROKER, "broker-loggers": BROKER_LOGGER}
SINGULAR = {TOPIC: "topic", BROKER: "broker", BROKER_LOGGER: "broker-logger"}


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs' `k1=v1,k2=[v1,v2],k3=v3`: brackets group a list value's commas."""
    out: dict[str, str] = {}
    items: list[str] = []
    depth, current = 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    if depth != 0:
        raise typer.BadParameter(f"unbalanced brackets in --add-config {text!r}")
    items.append(current)
    for item in filter(None, (i.strip() for i in items)):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"--add-config entry {item!r} must look like key=value")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _entity(entity_type: str | None, entity_name: str | None, entity_default: bool,
            topic: str | None, broker: str | None, broker_defaults: bool) -> tuple[int, str | None]:
    """-> (resource type, resource name; None = every entity of that type)."""
    for flag, given in (("--entity-name", entity_name), ("--topic", topic), ("--broker", broker)):
        if given is not None and not given.strip():
            what = "a topic name" if flag == "--topic" or entity_type == "topics" else (
                "a broker id" if flag == "--broker" or entity_type in ("brokers",
                                                                        "broker-loggers")
                else "a topic name or broker id")
            default = "" if flag == "--topic" or entity_type == "topics" else (
                " (or --entity-default for the cluster-wide broker default)")
            raise fail(f"{flag} is empty: give {what}{default}", 2)
    chosen = [x for x in (topic is not None, broker is not None, broker_defaults) if x]
    if len(chosen) > 1 or (chosen and entity_type is not None):
        raise fail("give one entity: --entity-type with --entity-name/--entity-default, or "
                   "one of --topic, --broker, --broker-defaults")
    if topic is not None:
        return TOPIC, topic
    if broker is not None:
        return BROKER, broker
    if broker_defaults:
        return BROKER, ""
    if entity_type is None:
        raise fail("--entity-type (topics, brokers or broker-loggers) is required")
    if entity_type not in ENTITY_TYPES:
        raise fail(f"--entity-type {entity_type!r} is not supported here; use topics, "
                   "brokers or broker-loggers")
    rtype = ENTITY_TYPES[entity_type]
    if entity_default:
        if rtype != BROKER:
            raise fail("--entity-default is only for --entity-type brokers")
        if entity_name is not None:
            raise fail("give --entity-name or --entity-default, not both")
        return rtype, ""
    return rtype, entity_name


def _label(rtype: int, name: str) -> str:
    if rtype == BROKER and name == "":
        return "brokers in the cluster"
    return f"{SINGULAR[rtype]} {name}"


def _format(entry: ConfigEntry) -> str:
    """kafka-configs' line (a value that is not set, or sensitive, is `null`)."""
    def shown(v: str | None) -> str:
        return "null" if v is None else v

    synonyms = ", ".join(f"{SOURCES.get(src, 'UNKNOWN')}:{n}={shown(v)}" for n, v, src in
                         entry.synonyms)
    return (f"  {entry.name}={shown(entry.value)} sensitive={str(entry.sensitive).lower()} "
            f"synonyms={{{synonyms}}}")


def _dynamic_sources(rtype: int, name: str) -> set[int]:
    """The config sources of the configs set on this entity itself (kafka-configs shows
    these without --all, and deletes only these): a topic's overrides, a broker's own
    dynamic configs, the cluster-wide broker defaults."""
    if rtype == TOPIC:
        return {1}
    if rtype == BROKER_LOGGER:
        return {6}  # every logger: its level is dynamic
    return {2} if name != "" else {3}


def refuse_unset_deletes(admin: AdminClient, name: str, keys: list[str],
                         rtype: int = TOPIC) -> None:
    """As kafka-configs: only a key set at this level (a topic's override, a broker's or
    the cluster default's dynamic config) can be deleted; any other is "Invalid config(s):
    k1,k2" (exit 1) and nothing is changed. (`topics alter --delete-config` uses it too.)"""
    if not keys:
        return
    entries = admin.describe_configs(name, resource_type=rtype)
    if rtype == BROKER_LOGGER:  # kafka-configs: the loggers must exist, to set or reset
        unknown = [k for k in keys if k not in entries]
        if unknown:
            raise fail(f"Invalid broker logger(s): {','.join(unknown)}")
        return
    dynamic = _dynamic_sources(rtype, name)
    unset = [k for k in keys if k not in entries or entries[k].source not in dynamic]
    if unset:
        raise fail(f"Invalid config(s): {','.join(unset)}")


def _names(admin: AdminClient, rtype: int, name: str | None) -> list[str]:
    if name is not None:
        return [name]
    if rtype == TOPIC:
        return list(admin.list_topics(include_internal=False))
    cluster = admin.client.refresh_metadata([])
    return [str(b) for b in sorted(cluster.brokers)]


def _run(bootstrap: str | None, prop: list[str], command_config: Path | None,
         fn: Any) -> Any:
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    security = client_security(prop, command_config)
    try:
        with AdminClient(bootstrap, security=security) as admin:
            return fn(admin)
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None


_ENTITY_TYPE = typer.Option(None, "--entity-type",
                            help="topics, brokers or broker-loggers (a broker's log levels).")
_ENTITY_NAME = typer.Option(None, "--entity-name", help="Topic name or broker id.")
_ENTITY_DEFAULT = typer.Option(False, "--entity-default",
                               help="The cluster-wide default broker configs.")
_TOPIC = typer.Option(None, "--topic", help="Same as --entity-type topics --entity-name.")
_BROKER = typer.Option(None, "--broker", help="Same as --entity-type brokers --entity-name.")
_BROKER_DEFAULTS = typer.Option(False, "--broker-defaults",
                                help="Same as --entity-type brokers --entity-default.")


@configs_app.command("describe")
def describe(
    entity_type: str | None = _ENTITY_TYPE, entity_name: str | None = _ENTITY_NAME,
    entity_default: bool = _ENTITY_DEFAULT, topic: str | None = _TOPIC,
    broker: str | None = _BROKER, broker_defaults: bool = _BROKER_DEFAULTS,
    show_all: bool = typer.Option(False, "--all",
                                  help="Every config, not only the dynamic ones."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Show the dynamic configs of topics or brokers (--all: every config), or a broker's
    loggers and their levels."""
    rtype, name = _entity(entity_type, entity_name, entity_default, topic, broker,
                          broker_defaults)

    def run(admin: AdminClient) -> None:
        for n in _names(admin, rtype, name):
            entries = admin.describe_configs(n, resource_type=rtype)
            dynamic = _dynamic_sources(rtype, n)
            shown = [e for e in entries.values() if show_all or e.source in dynamic]
            head = "All" if show_all else ("Default" if rtype == BROKER and n == ""
                                           else "Dynamic")
            typer.echo(f"{head} configs for {_label(rtype, n)} are:")
            for e in sorted(shown, key=lambda e: e.name):
                typer.echo(_format(e))

    _run(bootstrap, prop, command_config, run)


@configs_app.command("alter")
def alter(
    entity_type: str | None = _ENTITY_TYPE, entity_name: str | None = _ENTITY_NAME,
    entity_default: bool = _ENTITY_DEFAULT, topic: str | None = _TOPIC,
    broker: str | None = _BROKER, broker_defaults: bool = _BROKER_DEFAULTS,
    add_config: str = typer.Option("", "--add-config",
                                   help="Configs to set: 'k1=v1,k2=[v1,v2],k3=v3'."),
    delete_config: str = typer.Option("", "--delete-config",
                                      help="Configs to remove: 'k1,k2'."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Set (--add-config) and remove (--delete-config) configs of a topic or broker, or a
    broker's logger levels (--add-config kafkactl.broker=DEBUG; --delete-config resets)."""
    rtype, name = _entity(entity_type, entity_name, entity_default, topic, broker,
                          broker_defaults)
    if name is None:
        raise fail("--alter needs --entity-name or --entity-default")
    try:
        to_set = parse_add_config(add_config)
    except typer.BadParameter as e:
        raise fail(str(e)) from None
    to_delete = [k.strip() for k in delete_config.split(",") if k.strip()]
    if not to_set and not to_delete:
        raise fail("give --add-config and/or --delete-config")
    both = set(to_set) & set(to_delete)
    if both:
        raise fail(f"both added and deleted: {', '.join(sorted(both))}")
    what = ("default config for brokers in the cluster" if rtype == BROKER and name == ""
            else f"config for {_label(rtype, name)}")

    def run(admin: AdminClient) -> None:
        from kafkactl.client.errors import ClientError
        from kafkactl.protocol.errors import KafkaError

        try:
            refuse_unset_deletes(admin, name, to_delete + (
                list(to_set) if rtype == BROKER_LOGGER else []), rtype)
            admin.alter_configs(name, to_set, to_delete, resource_type=rtype)
        except (ClientError, KafkaError) as e:
            # the client says "alter NAME: ERROR: why": name the entity in words
            message = str(e).removeprefix(f"alter {name}: ").removeprefix(
                f"configs of {name}: ")
            raise fail(f"cannot update the {what}: {message}") from None

    _run(bootstrap, prop, command_config, run)
    typer.echo(f"Completed updating {what}.")
    if rtype == BROKER:
        from kafkactl.broker.dynamic_config import is_stored_only

        stored = sorted(k for k in to_set if is_stored_only(k))
        if stored:
            typer.echo(f"note: a kafkactl broker stores {', '.join(stored)} but does not act "
                       "on it (Kafka's brokers do).", err=True)


def register(app: typer.Typer) -> None:
    app.add_typer(configs_app, name="configs")
