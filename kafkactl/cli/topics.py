"""`kafkactl topics create|list|describe|delete|alter` (kafka-topics, through the protocol)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    client_security,
    command_config_option,
    fail,
    parse_key_values,
    property_option,
)

if TYPE_CHECKING:  # the client is imported when a command runs, so --help stays fast
    from kafkactl.client.admin import AdminClient

topics_app = typer.Typer(help="Create, list, describe, alter and delete topics.",
                         no_args_is_help=True)
T = TypeVar("T")


def _run(bootstrap: str | None, prop: list[str], command_config: Path | None,
         fn: Callable[[AdminClient], T]) -> T:
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    security = client_security(prop, command_config)
    try:
        with AdminClient(bootstrap, security=security) as admin:
            return fn(admin)
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None


def _raise_errors(results: dict[str, Any], ok_verb: str, *, tolerate: int | None = None) -> None:
    failed = False
    for name, err in results.items():
        if err is None:
            typer.echo(f"{ok_verb} topic {name}.")
        elif tolerate is not None and int(err.code) == tolerate:
            continue
        else:
            typer.echo(f"error: topic {name}: {err.code.name}: {err.message}", err=True)
            failed = True
    if failed:
        raise typer.Exit(1)


@topics_app.command("create")
def create(
    topic: list[str] = typer.Option(..., "--topic", "-t", help="Topic name (repeatable)."),
    partitions: int = typer.Option(-1, "--partitions", help="Partition count (broker default)."),
    replication_factor: int = typer.Option(-1, "--replication-factor",
                                           help="Replicas (broker default)."),
    config: list[str] = typer.Option([], "--config", help="Topic config k=v (repeatable)."),
    if_not_exists: bool = typer.Option(False, "--if-not-exists",
                                       help="No error if the topic exists."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Create topics."""
    try:
        cfg = parse_key_values(config, "config")
    except typer.BadParameter as e:
        raise fail(str(e), 2) from None
    res = _run(bootstrap, prop, command_config, lambda a: a.create_topics(
        {t: (partitions, replication_factor, cfg) for t in topic}))
    _raise_errors(res, "Created", tolerate=36 if if_not_exists else None)


@topics_app.command("list")
def list_(
    exclude_internal: bool = typer.Option(False, "--exclude-internal"),
    as_json: bool = typer.Option(False, "--json", help="A JSON array of names."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """List topic names."""
    names = _run(bootstrap, prop, command_config, lambda a: a.list_topics(not exclude_internal))
    if as_json:
        typer.echo(json.dumps(list(names)))
        return
    for name in names:
        typer.echo(name)


@topics_app.command("describe")
def describe(
    topic: list[str] = typer.Option([], "--topic", "-t", help="Topic (default: all)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Partitions, leaders, replicas and config overrides, in kafka-topics' layout."""

    def go(a: AdminClient) -> list[dict[str, Any]]:
        docs = []
        for name, t in a.describe_topics(topic or None).items():
            configs = a.describe_configs(name)
            docs.append({
                "topic": name,
                "partition_count": len(t.partitions),
                "replication_factor": max((len(p.replicas) for p in t.partitions.values()),
                                          default=0),
                "configs": {k: c.value for k, c in sorted(configs.items())
                            if not c.is_default and c.source == 1},
                "partitions": [{"partition": p.partition, "leader": p.leader,
                                "replicas": list(p.replicas), "isr": list(p.isr)}
                               for p in sorted(t.partitions.values(),
                                               key=lambda p: p.partition)],
            })
        return docs

    docs = _run(bootstrap, prop, command_config, go)
    if as_json:
        typer.echo(json.dumps(docs, indent=1))
        return
    for d in docs:
        overrides = ",".join(f"{k}={v}" for k, v in d["configs"].items())
        typer.echo(f"Topic: {d['topic']}\tPartitionCount: {d['partition_count']}\t"
                   f"ReplicationFactor: {d['replication_factor']}\tConfigs: {overrides}")
        for p in d["partitions"]:
            typer.echo(f"\tTopic: {d['topic']}\tPartition: {p['partition']}\t"
                       f"Leader: {p['leader']}\t"
                       f"Replicas: {','.join(map(str, p['replicas']))}\t"
                       f"Isr: {','.join(map(str, p['isr']))}")


@topics_app.command("delete")
def delete(
    topic: list[str] = typer.Option(..., "--topic", "-t", help="Topic (repeatable)."),
    if_exists: bool = typer.Option(False, "--if-exists", help="No error if it is absent."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Delete topics."""
    res = _run(bootstrap, prop, command_config, lambda a: a.delete_topics(list(topic)))
    _raise_errors(res, "Deleted", tolerate=3 if if_exists else None)


@topics_app.command("alter")
def alter(
    topic: str = typer.Option(..., "--topic", "-t"),
    partitions: int | None = typer.Option(None, "--partitions",
                                          help="Grow the topic to this many partitions."),
    config: list[str] = typer.Option([], "--config", help="Set k=v (repeatable)."),
    delete_config: list[str] = typer.Option([], "--delete-config",
                                            help="Remove an override (repeatable)."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Add partitions and/or change topic configs."""
    if partitions is None and not config and not delete_config:
        raise fail("nothing to alter: give --partitions, --config or --delete-config", 2)
    try:
        cfg = parse_key_values(config, "config")
    except typer.BadParameter as e:
        raise fail(str(e), 2) from None

    def go(a: AdminClient) -> None:
        if partitions is not None:
            _raise_errors(a.create_partitions({topic: partitions}), "Added partitions to")
        if cfg or delete_config:
            a.alter_configs(topic, cfg, delete_config)
            typer.echo(f"Updated config of topic {topic}.")

    _run(bootstrap, prop, command_config, go)


def register(app: typer.Typer) -> None:
    app.add_typer(topics_app, name="topics")
