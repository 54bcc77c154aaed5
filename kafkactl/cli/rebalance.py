"""`kafkactl rebalance --group G [--json] [--trigger] [--dry-run]`: the seed's consumer
rebalancing, shown and driven.

Prints each member with its subscription, its current assignment and the assignment the
range algorithm (sort partitions, sort members, contiguous blocks, remainders to the first
members) computes for the same members. `--trigger` makes the group rebalance: a transient
member joins (every member must rejoin), then leaves. `--dry-run` only shows.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import typer

from kafkactl.cli._client_options import bootstrap_option, fail

if TYPE_CHECKING:  # the client is imported when a command runs, so --help stays fast
    from kafkactl.client.group.group_admin import GroupAdmin, GroupDescription
    from kafkactl.client.kafka_client import KafkaClient


def range_plan(client: KafkaClient, desc: GroupDescription) -> dict[str, list[tuple[str, int]]]:
    from kafkactl.client.group.assignors import MemberSubscription, range_assign

    topics = sorted({t for m in desc.members for t in m.subscription})
    partitions: dict[str, list[int]] = {}
    if topics:
        cluster = client.refresh_metadata(topics)
        partitions = {t: sorted(cluster.topics[t].partitions) for t in topics
                      if t in cluster.topics and cluster.topics[t].partitions}
    subs = [MemberSubscription(m.member_id, tuple(m.subscription), m.group_instance_id)
            for m in desc.members]
    return range_assign(partitions, subs)


def trigger(admin: GroupAdmin, desc: GroupDescription, timeout_s: float) -> int:
    """Join as a transient member (forcing every member to rejoin), then leave.
    Returns the generation the rebalance produced."""
    from kafkactl.protocol.api_keys import ApiKey
    from kafkactl.protocol.data import SUBSCRIPTION, encode_data
    from kafkactl.protocol.errors import ErrorCode

    if not desc.members:
        raise ValueError(f"group {desc.group_id!r} has no members to rebalance")
    conn = admin.coordinator(desc.group_id)
    conn.request_timeout = max(conn.request_timeout, timeout_s)
    meta = encode_data(SUBSCRIPTION, 0, {"topics": [], "user_data": None})
    body: dict[str, Any] = {
        "group_id": desc.group_id, "session_timeout_ms": 10000,
        "rebalance_timeout_ms": int(timeout_s * 1000), "member_id": "",
        "group_instance_id": None, "protocol_type": desc.protocol_type or "consumer",
        "protocols": [{"name": desc.protocol or "range", "metadata": meta}]}
    resp = conn.request(ApiKey.JOIN_GROUP, body, timeout=timeout_s)
    if resp["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
        body["member_id"] = resp["member_id"]
        resp = conn.request(ApiKey.JOIN_GROUP, body, timeout=timeout_s)
    if resp["error_code"]:
        raise ValueError(f"could not trigger a rebalance: JoinGroup answered "
                         f"{ErrorCode(resp['error_code']).name}")
    member, generation = resp["member_id"], resp["generation_id"]
    conn.request(ApiKey.LEAVE_GROUP, {"group_id": desc.group_id, "member_id": member,
                                      "members": [{"member_id": member,
                                                   "group_instance_id": None}]})
    return int(generation)


def rebalance(group: str = typer.Option(..., "--group", "-g", help="The consumer group."),
              as_json: bool = typer.Option(False, "--json", help="JSON output."),
              do_trigger: bool = typer.Option(False, "--trigger",
                                              help="Force the group to rebalance."),
              dry_run: bool = typer.Option(False, "--dry-run",
                                           help="Only show (with --trigger: do nothing)."),
              timeout: float = typer.Option(60.0, "--timeout",
                                            help="Seconds to wait for a triggered "
                                                 "rebalance."),
              bootstrap: str | None = bootstrap_option()) -> None:
    """Members, their current assignment and the range assignment for the group."""
    from rich.console import Console
    from rich.table import Table

    from kafkactl.client.errors import ClientError
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.protocol.errors import KafkaError

    client = KafkaClient(bootstrap, client_id="kafkactl-rebalance")
    admin = GroupAdmin(client)
    triggered = None
    try:
        desc = admin.describe_group(group)
        if desc.state == "Dead":
            raise ValueError(f"group {group!r} does not exist")
        plan = range_plan(client, desc)
        if do_trigger and not dry_run:
            triggered = trigger(admin, desc, timeout)
            time.sleep(0.2)
            desc = admin.describe_group(group)
    except (ClientError, KafkaError, ValueError) as e:
        raise fail(str(e)) from None
    finally:
        admin.close()
        client.close()
    rows = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
             "client_id": m.client_id, "host": m.client_host, "subscription": m.subscription,
             "current": [f"{t}-{p}" for t, p in m.assignment],
             "range": [f"{t}-{p}" for t, p in plan.get(m.member_id, [])]}
            for m in sorted(desc.members, key=lambda m: m.member_id)]
    if as_json:
        typer.echo(json.dumps({"group": group, "state": desc.state,
                               "protocol": desc.protocol, "triggered_generation": triggered,
                               "members": rows}, indent=1))
        return
    table = Table("MEMBER", "CLIENT-ID", "HOST", "SUBSCRIPTION", "CURRENT", "RANGE",
                  title=f"group {group}: {desc.state}, protocol {desc.protocol or '-'}")
    for r in rows:
        table.add_row(r["member_id"], r["client_id"], r["host"], ",".join(r["subscription"]),
                      " ".join(r["current"]) or "-", " ".join(r["range"]) or "-")
    Console(width=220).print(table)
    if triggered is not None:
        typer.echo(f"Rebalance triggered: the group reached generation {triggered}.")
    elif do_trigger:
        typer.echo("Dry run: no rebalance was triggered.", err=True)


def register(app: typer.Typer) -> None:
    app.command("rebalance")(rebalance)
