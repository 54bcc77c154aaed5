"""`kafkactl cluster health` (as `rpk cluster health`): is every broker up, does every
partition have a leader and a full ISR? Exit 0 when so, 1 when not (saying what is wrong),
2 when no broker answers.

Through the Kafka protocol only (a Metadata request): a client cannot see ZooKeeper's
/brokers/ids, so the brokers expected are those named as a replica of some partition (or
as offline replicas); one missing from Metadata's broker list is down. So is one the
Metadata still lists that does not answer a request of its own within the request timeout
(`nodes_not_answering`): a killed broker stays listed until its ZooKeeper session expires,
a frozen one for as long as its session lives.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    client_security,
    command_config_option,
    property_option,
)

if TYPE_CHECKING:
    from kafkactl.client.cluster import ClusterMetadata

EXIT_UNHEALTHY = 1
EXIT_UNREACHABLE = 2


def health_document(cluster: ClusterMetadata, not_answering: list[int] | None = None
                    ) -> dict[str, Any]:
    """The health of `cluster` (one Metadata response) as a JSON-ready dict;
    `not_answering`: listed brokers that did not answer (probe)."""
    silent = sorted(not_answering or ())
    up = sorted(set(cluster.brokers) - set(silent))
    expected: set[int] = set(cluster.brokers)
    leaderless: dict[str, list[int]] = {}
    under: dict[str, list[int]] = {}
    for name, topic in sorted(cluster.topics.items()):
        for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
            expected.update(p.replicas)
            expected.update(p.offline_replicas)
            if p.leader < 0:
                leaderless.setdefault(name, []).append(p.partition)
            elif len(p.isr) < len(p.replicas):
                under.setdefault(name, []).append(p.partition)
    down = sorted(expected - set(up))
    reasons = []
    if down:
        reasons.append("nodes_down")
    if cluster.controller_id < 0:
        reasons.append("no_active_controller")
    if leaderless:
        reasons.append("leaderless_partitions")
    if under:
        reasons.append("under_replicated_partitions")
    return {
        "healthy": not reasons,
        "unhealthy_reasons": reasons,
        "cluster_id": cluster.cluster_id,
        "controller_id": cluster.controller_id,
        "all_nodes": sorted(expected),
        "nodes_down": down,
        "nodes_not_answering": silent,
        "leaderless_partitions": leaderless,
        "leaderless_count": sum(len(v) for v in leaderless.values()),
        "under_replicated_partitions": under,
        "under_replicated_count": sum(len(v) for v in under.values()),
    }


def _partitions(entries: dict[str, list[int]]) -> str:
    return "[" + " ".join(f"{t}/{p}" for t, ps in entries.items() for p in ps) + "]"


def render(doc: dict[str, Any]) -> str:
    """rpk's overview layout."""
    def ids(xs: list[int]) -> str:
        return "[" + " ".join(map(str, xs)) + "]"

    controller = doc["controller_id"]
    rows = [
        ("Healthy:", str(doc["healthy"]).lower()),
        ("Unhealthy reasons:", "[" + " ".join(doc["unhealthy_reasons"]) + "]"),
        ("Controller ID:", str(controller) if controller >= 0 else "none"),
        ("All nodes:", ids(doc["all_nodes"])),
        ("Nodes down:", ids(doc["nodes_down"])),
        (f"Leaderless partitions ({doc['leaderless_count']}):",
         _partitions(doc["leaderless_partitions"])),
        (f"Under-replicated partitions ({doc['under_replicated_count']}):",
         _partitions(doc["under_replicated_partitions"])),
    ]
    width = max(len(k) for k, _ in rows) + 2
    lines = ["CLUSTER HEALTH OVERVIEW", "=======================",
             *(f"{k:<{width}}{v}" for k, v in rows)]
    return "\n".join(lines)


def check(client: Any) -> dict[str, Any]:
    cluster = client.refresh_metadata(None)
    return health_document(cluster, probe(client, sorted(cluster.brokers)))


def probe(client: Any, nodes: list[int]) -> list[int]:
    """The brokers among `nodes` that do not answer a Metadata request (of no topic) on a
    connection of their own within the client's request timeout, asked all at once."""
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.api_keys import ApiKey

    deadline = time.monotonic() + client.request_timeout
    silent: list[int] = []
    asked = []
    for node in nodes:
        try:
            conn = client.connection(node)
            version = conn.version_for(ApiKey.METADATA)
            body = client.metadata_request_body(version, [], False)
            asked.append((node, conn, conn.send(ApiKey.METADATA, body, version=version)))
        except (ClientError, OSError):
            silent.append(node)
            client.drop_connection(node)
    for node, conn, req in asked:
        try:
            conn.wait(req, max(0.1, deadline - time.monotonic()))
        except (ClientError, OSError):
            silent.append(node)
            client.drop_connection(node)
    return sorted(silent)


def health(
    as_json: bool = typer.Option(False, "--json", help="One JSON document (with --watch: one "
                                 "a line per check)."),
    watch: bool = typer.Option(False, "--watch", "-w",
                               help="Check again every --interval seconds until Ctrl-C."),
    interval: float = typer.Option(2.0, "--interval", min=0.1, metavar="SECONDS",
                                   help="Seconds between checks with --watch."),
    exit_when_healthy: bool = typer.Option(
        False, "--exit-when-healthy", "-e",
        help="With --watch: stop (exit 0) at the first healthy check."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Every broker up, every partition with a leader and a full ISR? Exit 0 if so, 1 if not
    (saying what is wrong), 2 if no broker answers."""
    from kafkactl.client.errors import ClientError
    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.protocol.errors import KafkaError

    security = client_security(prop, command_config)
    client: KafkaClient | None = None
    code = 0
    try:
        while True:
            try:
                if client is None:
                    client = KafkaClient(bootstrap, client_id="kafkactl-health",
                                         security=security, request_timeout_ms=10000)
                doc = check(client)
            except (ClientError, KafkaError, OSError, ValueError) as e:
                if client is not None:
                    client.close()
                    client = None
                if not watch:
                    typer.echo(f"error: cannot reach the cluster: {e}", err=True)
                    raise typer.Exit(EXIT_UNREACHABLE) from None
                doc = {"healthy": False, "unhealthy_reasons": ["unreachable"],
                       "error": str(e)}
            code = 0 if doc["healthy"] else (
                EXIT_UNREACHABLE if "unreachable" in doc["unhealthy_reasons"]
                else EXIT_UNHEALTHY)
            _show(doc, as_json, watch)
            if not watch or (exit_when_healthy and code == 0):
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        if client is not None:
            client.close()
    raise typer.Exit(code)


def _show(doc: dict[str, Any], as_json: bool, watch: bool) -> None:
    if watch:
        doc = {"time": datetime.now(UTC).isoformat(timespec="seconds"), **doc}
    if as_json:
        typer.echo(json.dumps(doc) if watch else json.dumps(doc, indent=1))
    elif "error" in doc:
        typer.echo(f"{doc['time']}  cannot reach the cluster: {doc['error']}")
    else:
        if watch:
            typer.echo(f"{doc['time']}")
        typer.echo(render(doc))
        if watch:
            typer.echo("")


def register(cluster_app: typer.Typer) -> None:
    """Add `health` to the `cluster` command group."""
    cluster_app.command("health")(health)
