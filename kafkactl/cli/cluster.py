"""`kafkactl cluster describe`: the cluster id, the controller, the live brokers with their
endpoints, and the partitions that need attention (no leader: offline; fewer in-sync
replicas than replicas: under-replicated), from one Metadata request to any broker."""

from __future__ import annotations

import json
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
    from kafkactl.client.cluster import ClusterMetadata

cluster_app = typer.Typer(help="Describe the cluster (controller, brokers, offline and "
                          "under-replicated partitions) and verify replicas.",
                          no_args_is_help=True)


def describe_document(cluster: ClusterMetadata) -> dict[str, Any]:
    offline: dict[str, list[int]] = {}
    under: dict[str, list[int]] = {}
    for name, t in sorted(cluster.topics.items()):
        for p in sorted(t.partitions.values(), key=lambda p: p.partition):
            if p.leader < 0:
                offline.setdefault(name, []).append(p.partition)
            elif len(p.isr) < len(p.replicas):
                under.setdefault(name, []).append(p.partition)
    return {
        "cluster_id": cluster.cluster_id,
        "controller_id": cluster.controller_id,
        "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in sorted(cluster.brokers.values(), key=lambda b: b.node_id)],
        "topics": len(cluster.topics),
        "partitions": sum(len(t.partitions) for t in cluster.topics.values()),
        "offline_partitions": offline,
        "under_replicated_partitions": under,
    }


@cluster_app.command("describe")
def describe(
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Cluster id, controller, live brokers, and offline / under-replicated partitions."""
    from kafkactl.client.errors import ClientError
    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.protocol.errors import KafkaError

    security = client_security(prop, command_config)
    try:
        client = KafkaClient(bootstrap, client_id="kafkactl-cluster", security=security)
        try:
            doc = describe_document(client.refresh_metadata(None))
        finally:
            client.close()
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None
    if as_json:
        typer.echo(json.dumps(doc, indent=1))
        return
    controller = doc["controller_id"]
    typer.echo(f"Cluster id: {doc['cluster_id']}")
    typer.echo(f"Controller: {controller if controller >= 0 else 'none'}")
    typer.echo(f"Brokers ({len(doc['brokers'])}):")
    for b in doc["brokers"]:
        mark = "  (controller)" if b["id"] == controller else ""
        rack = f"  rack {b['rack']}" if b["rack"] else ""
        typer.echo(f"  {b['id']}\t{b['host']}:{b['port']}{rack}{mark}")
    typer.echo(f"Topics: {doc['topics']}, partitions: {doc['partitions']}")
    for key, title in (("offline_partitions", "Offline partitions (no leader)"),
                       ("under_replicated_partitions", "Under-replicated partitions")):
        entries = doc[key]
        count = sum(len(v) for v in entries.values())
        typer.echo(f"{title}: {count}")
        for name, parts in entries.items():
            typer.echo(f"  {name}: {','.join(map(str, parts))}")


def _compacted(bootstrap: str | None, security: Any, topics: list[str]) -> set[str]:
    """The topics whose cleanup.policy has compact (their replicas are compared by record:
    each broker's cleaner rewrites its own copy at its own time)."""
    from kafkactl.client.admin import AdminClient

    admin = AdminClient(bootstrap, client_id="kafkactl-verify-replicas", security=security)
    try:
        out = set()
        for t in topics:
            entry = admin.describe_configs(t, ["cleanup.policy"]).get("cleanup.policy")
            if entry is not None and "compact" in (entry.value or ""):
                out.add(t)
        return out
    finally:
        admin.close()


@cluster_app.command("verify-replicas")
def verify_replicas(
    topic: list[str] = typer.Option([], "--topic", "-t", help="Topic (repeatable; "
                                    "default: every topic)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Compare every replica's committed log (batch offsets and CRCs), from the largest
    log start offset among the replicas to the smallest high watermark, and report where
    replicas differ (Kafka's ReplicaVerificationTool); a compacted topic's replicas record
    by record (each broker cleans its own copy: an offset one has cleaned away is no
    divergence). Without --topic every topic is
    checked, internal ones (__consumer_offsets, __transaction_state) included. Exit 1 on
    any divergence or replica that cannot be read; a single-replica partition has nothing
    to compare (exit 0)."""
    from kafkactl.client.errors import ClientError
    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.client.replica_verifier import verify_partition
    from kafkactl.protocol.errors import KafkaError

    security = client_security(prop, command_config)
    try:
        client = KafkaClient(bootstrap, client_id="kafkactl-verify-replicas", security=security)
        try:
            cluster = (client.ensure_topics(list(topic), allow_auto_create=False) if topic
                       else client.refresh_metadata(None))
            names = sorted(n for n in cluster.topics if not topic or n in topic)
            compacted = _compacted(bootstrap, security, names)
            checks = [verify_partition(client, name, p, list(part.replicas),
                                       compacted=name in compacted)
                      for name in names
                      for p, part in sorted(cluster.topics[name].partitions.items())]
        finally:
            client.close()
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None
    rows = [{"topic": c.topic, "partition": c.partition, "replicas": c.replicas,
             "compared": c.compared,
             "checked_from": c.checked_from if c.compared else None,
             "checked_up_to": c.checked_up_to if c.compared else None,
             "batches": c.batches if c.compared else None,
             "diverged_at": c.diverged_at, "errors": {str(b): e for b, e in c.errors.items()}}
            for c in checks]
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
    else:
        for c in checks:
            replicas = f"{c.topic}-{c.partition}\treplicas {','.join(map(str, c.replicas))}"
            if c.single_replica:
                typer.echo(f"{replicas}\tone replica: nothing to compare")
                continue
            state = "ok" if c.ok else (f"DIVERGED at offset {c.diverged_at}"
                                       if c.diverged_at is not None else "NOT CHECKED")
            span = "not compared"
            if c.compared:
                start = f"from offset {c.checked_from} " if c.checked_from else ""
                span = f"{start}up to offset {c.checked_up_to} ({c.batches} batches)"
            typer.echo(f"{replicas}\t{span}\t{state}")
            for broker, why in c.errors.items():
                typer.echo(f"{c.topic}-{c.partition}: replica {broker}: {why}", err=True)
    if any(not c.ok for c in checks):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    from kafkactl.cli import cluster_health

    cluster_health.register(cluster_app)
    app.add_typer(cluster_app, name="cluster")
