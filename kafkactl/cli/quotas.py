"""`kafkactl quotas add|list|remove`: client quotas (kafka-configs --entity-type
users|clients|ips --alter --add-config producer_byte_rate=..., through
AlterClientQuotas/DescribeClientQuotas).

An entity is a user (`--user NAME` or `--user-default`), a client id (`--client-id NAME` or
`--client-default`), or both, as in Kafka: the most specific one that sets a key applies.
Or an IP address alone (`--ip ADDRESS` or `--ip-default`, KIP-612), whose one key is
connection_creation_rate: new connections a second the brokers accept from that address
(the address's own quota, else the default's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    client_security,
    command_config_option,
    fail,
    property_option,
)
from kafkactl.cli._output import print_table, write_line

quotas_app = typer.Typer(
    help="Add, list and remove client quotas (producer_byte_rate, consumer_byte_rate, "
         "request_percentage, controller_mutation_rate) per user, client id, or both; "
         "and connection_creation_rate per IP address.",
    no_args_is_help=True)
KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
        "controller_mutation_rate")
IP_KEYS = ("connection_creation_rate",)


def _user() -> Any:
    return typer.Option(None, "--user", help="The user (principal name, e.g. alice).")


def _user_default() -> Any:
    return typer.Option(False, "--user-default", help="The default user (<default>).")


def _client() -> Any:
    return typer.Option(None, "--client-id", help="The client id (client.id).")


def _client_default() -> Any:
    return typer.Option(False, "--client-default", help="The default client id (<default>).")


def _ip() -> Any:
    return typer.Option(None, "--ip", help="The client IP address (its quota: "
                        "connection_creation_rate; not with --user or --client-id).")


def _ip_default() -> Any:
    return typer.Option(False, "--ip-default", help="The default IP address (<default>): "
                        "for every address without a quota of its own.")


def _entity(user: str | None, user_default: bool, client_id: str | None,
            client_default: bool, required: bool = True, ip: str | None = None,
            ip_default: bool = False) -> dict[str, str | None]:
    if user is not None and user_default:
        raise fail("--user and --user-default: give one", 2)
    if client_id is not None and client_default:
        raise fail("--client-id and --client-default: give one", 2)
    if ip is not None and ip_default:
        raise fail("--ip and --ip-default: give one", 2)
    entity: dict[str, str | None] = {}
    if user is not None or user_default:
        entity["user"] = user
    if client_id is not None or client_default:
        entity["client-id"] = client_id
    if ip is not None or ip_default:
        if entity:
            raise fail("an IP address's quota stands alone: give --ip or --ip-default "
                       "without --user or --client-id", 2)
        entity["ip"] = ip
    if required and not entity:
        raise fail("give the entity: --user NAME or --user-default, and/or --client-id NAME "
                   "or --client-default; or --ip ADDRESS or --ip-default", 2)
    return entity


def _keys_of(entity: dict[str, str | None]) -> tuple[str, ...]:
    return IP_KEYS if "ip" in entity else KEYS


def _values(config: list[str], keys: tuple[str, ...] = KEYS) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in config:
        for part in item.split(","):
            key, sep, raw = part.partition("=")
            key = key.strip()
            if not sep or key not in keys:
                raise fail(f"--config {part!r}: use key=value with a key of {', '.join(keys)}",
                           2)
            try:
                out[key] = float(raw)
            except ValueError:
                raise fail(f"--config {part!r}: {raw!r} is not a number", 2) from None
    if not out:
        raise fail("give at least one --config key=value", 2)
    return out


def _admin(bootstrap: str | None, prop: list[str], command_config: Path | None) -> Any:
    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.client.quota_admin import QuotaAdmin

    return QuotaAdmin(KafkaClient(bootstrap, client_id="kafkactl-admin",
                                  security=client_security(prop, command_config)))


def _run(fn: Any) -> Any:
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    try:
        return fn()
    except (ClientError, KafkaError, OSError) as e:
        raise fail(str(e)) from None


def _num(v: float) -> str:
    return str(int(v)) if v == int(v) else f"{v:g}"


def _name(value: str | None) -> str:
    """An entity's name as shown: <default> for the default entity; a name that reads the
    same (a user literally named "<default>") quoted, so the two are told apart."""
    if value is None or value == "":
        return "<default>"
    return f"'{value}'" if value == "<default>" else value


def _shown(entity: dict[str, str | None]) -> str:
    parts = []
    if "user" in entity:
        parts.append(f"user {_name(entity['user'])}")
    if "client-id" in entity:
        parts.append(f"client-id {_name(entity['client-id'])}")
    if "ip" in entity:
        parts.append(f"ip {_name(entity['ip'])}")
    return ", ".join(parts)


@quotas_app.command("add")
def add(
    config: list[str] = typer.Option([], "--config", "-c",
                                      help="key=value (repeatable, or comma-separated)."),
    user: str | None = _user(), user_default: bool = _user_default(),
    client_id: str | None = _client(), client_default: bool = _client_default(),
    ip: str | None = _ip(), ip_default: bool = _ip_default(),
    bootstrap: str | None = bootstrap_option(), prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Set quota keys of an entity (a cluster keeps them in ZooKeeper: every broker applies
    them)."""
    entity = _entity(user, user_default, client_id, client_default, ip=ip,
                     ip_default=ip_default)
    values = _values(config, _keys_of(entity))
    admin = _admin(bootstrap, prop, command_config)
    try:
        _run(lambda: admin.alter(entity, values))
    finally:
        admin.client.close()
    write_line(f"Set {', '.join(f'{k}={_num(v)}' for k, v in values.items())} for "
               f"{_shown(entity)}.")


@quotas_app.command("remove")
def remove(
    key: list[str] = typer.Option(
        [], "--config", "-c", "--key", "-k",
        help="A quota key to remove (repeatable, or comma-separated; key=value as `add` "
             "takes it is fine; default: all)."),
    user: str | None = _user(), user_default: bool = _user_default(),
    client_id: str | None = _client(), client_default: bool = _client_default(),
    ip: str | None = _ip(), ip_default: bool = _ip_default(),
    bootstrap: str | None = bootstrap_option(), prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Remove quota keys (default: all of them) of an entity; says so when none of them
    was set."""
    entity = _entity(user, user_default, client_id, client_default, ip=ip,
                     ip_default=ip_default)
    known = _keys_of(entity)
    keys = list(dict.fromkeys(part.partition("=")[0].strip() for item in key
                              for part in item.split(",") if part.strip()))
    for k in keys:
        if k not in known:
            raise fail(f"--config {k!r}: use one of {', '.join(known)}", 2)
    wanted = keys or list(known)
    admin = _admin(bootstrap, prop, command_config)
    try:
        entries = _run(lambda: admin.describe(dict(entity), strict=True))
        values: dict[str, float] = next((e.values for e in entries if e.entity == entity), {})
        was_set = [k for k in wanted if k in values]
        if was_set:
            _run(lambda: admin.alter(entity, {}, remove=wanted))
    finally:
        admin.client.close()
    if not was_set:
        write_line(f"Nothing to remove: no {' or '.join(wanted) if keys else 'quota'} is "
                   f"set for {_shown(entity)}.")
        return
    unset = [k for k in keys if k not in was_set]
    write_line(f"Removed {', '.join(was_set)} of {_shown(entity)}."
               + (f" ({', '.join(unset)} {'was' if len(unset) == 1 else 'were'} not set.)"
                  if unset else ""))


@quotas_app.command("list")
def list_quotas(
    user: str | None = _user(), user_default: bool = _user_default(),
    client_id: str | None = _client(), client_default: bool = _client_default(),
    ip: str | None = _ip(), ip_default: bool = _ip_default(),
    as_json: bool = typer.Option(False, "--json", help="JSON output."),
    bootstrap: str | None = bootstrap_option(), prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """The quotas set (only those of the given entity, when one is given)."""
    entity = _entity(user, user_default, client_id, client_default, required=False, ip=ip,
                     ip_default=ip_default)
    admin = _admin(bootstrap, prop, command_config)
    try:
        entries = _run(lambda: admin.describe(dict(entity)))
    finally:
        admin.client.close()
    if as_json:
        write_line(json.dumps([{"entity": e.entity, "values": e.values} for e in entries]))
        return
    if not entries:
        write_line("No client quotas are set.")
        return
    from rich.table import Table

    clients = [e for e in entries if "ip" not in e.entity]
    ips = [e for e in entries if "ip" in e.entity]
    if clients:
        table = Table("USER", "CLIENT-ID", *(k.upper() for k in KEYS), box=None)
        for e in clients:
            table.add_row(
                "-" if "user" not in e.entity else _name(e.entity["user"]),
                "-" if "client-id" not in e.entity else _name(e.entity["client-id"]),
                *(_num(e.values[k]) if k in e.values else "-" for k in KEYS))
        print_table(table)
    if ips:
        if clients:
            write_line("")
        table = Table("IP", *(k.upper() for k in IP_KEYS), box=None)
        for e in ips:
            table.add_row(_name(e.entity["ip"]),
                          *(_num(e.values[k]) if k in e.values else "-" for k in IP_KEYS))
        print_table(table)


def register(app: typer.Typer) -> None:
    app.add_typer(quotas_app, name="quotas")
