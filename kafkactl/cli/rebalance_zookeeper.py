"""`kafkactl rebalance --zookeeper Z --group G`: a ZooKeeper-coordinated group (the seed's
consumers) shown and triggered: each member's subscription, the partitions it owns now
(/consumers/G/owners) and the seed's range plan for the same members; `--trigger` makes
every member rebalance (a short-lived child under /consumers/G/ids fires their watches) and
waits until the owners match the plan."""

from __future__ import annotations

import json
import time
from typing import Any

import typer

from kafkactl.cli._client_options import fail
from kafkactl.cli._output import print_table
from kafkactl.protocol.internal_topics import is_internal


def zookeeper_rebalance(group: str, zookeeper: str, *, as_json: bool, trigger: bool,
                        timeout: float) -> None:
    from kafkactl.cli.offsets_migrate import connect_existing_chroot
    from kafkactl.cluster import consumer_registry as registry
    from kafkactl.cluster import zookeeper as zkconn
    from kafkactl.cluster.broker_registry import registered_topics

    zk = connect_existing_chroot(zookeeper)  # a mistyped chroot: said so, not created
    try:
        if group not in registry.groups(zk):
            raise fail(f"no group {group!r} in ZooKeeper at {zookeeper} (/consumers)")

        def snapshot() -> tuple[list[Any], dict[str, set[str]], dict[str, set[str]]]:
            members = registry.members(zk, group)
            topics = registered_topics(zk)
            parts = {t: sorted(p) for t, p in topics.items()
                     if any(m.streams_for(t) for m in members)
                     and (not is_internal(t) or any(m.pattern == "static"
                                                        for m in members))}
            plan = registry.range_assignment(parts, members)
            owners = registry.owners(zk, group)
            current: dict[str, set[str]] = {m.consumer_id: set() for m in members}
            for (t, p), thread in owners.items():
                current.setdefault(thread.rsplit("-", 1)[0], set()).add(f"{t}-{p}")
            planned = {cid: {f"{t}-{p}" for t, p in tps} for cid, tps in plan.items()}
            return members, current, planned

        members, current, planned = snapshot()
        settled = None
        if trigger:
            registry.touch_ids(zk, group)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                time.sleep(0.2)
                members, current, planned = snapshot()
                if all(current.get(cid, set()) == want for cid, want in planned.items()):
                    settled = True
                    break
            else:
                settled = False
    finally:
        zkconn.close(zk)
    rows = [{"consumer_id": m.consumer_id, "pattern": m.pattern,
             "subscription": m.subscription,
             "current": sorted(current.get(m.consumer_id, ())),
             "range": sorted(planned.get(m.consumer_id, ()))} for m in members]
    if as_json:
        typer.echo(json.dumps({"group": group, "coordination": "zookeeper",
                               "triggered": trigger, "settled": settled,
                               "members": rows}, indent=1))
    else:
        from rich.table import Table

        table = Table("CONSUMER", "SUBSCRIPTION", "CURRENT", "RANGE",
                      title=f"group {group}: ZooKeeper-coordinated, {len(rows)} member(s)")
        for r in rows:
            sub = ",".join(f"{t}x{n}" if n != 1 else t for t, n in r["subscription"].items())
            table.add_row(r["consumer_id"], f"{sub} ({r['pattern']})",
                          " ".join(r["current"]) or "-", " ".join(r["range"]) or "-")
        print_table(table)
        if settled is True:
            typer.echo("Rebalance triggered: every member owns its planned partitions.")
    if settled is False:
        raise fail(f"the group did not settle on the plan within {timeout:g} s")
