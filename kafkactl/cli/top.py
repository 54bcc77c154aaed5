"""`kafkactl top`: a live view of a broker or a cluster: brokers (up, controller), topics by
in/out rate, under-replicated and offline partitions, consumer groups by lag and lag trend.

Two sources:
- the Kafka protocol (default): Metadata (brokers, controller, leaders, ISRs), ListOffsets
  (log end offsets: the in rate is their growth), ListGroups, DescribeGroups and OffsetFetch
  (committed offsets: lag, and the out rate as the groups' committed progress);
- the brokers' metrics endpoints (`--metrics URL`, once per broker): the broker's own
  counters (messages/bytes in, bytes out), its gauges and the consumer lag it computes, and
  the process's CPU, memory and connections.

A broker's CPU is the process's, which only its metrics endpoint tells (the Kafka protocol
has no such figure): with the protocol source, `--metrics-port PORT` (every broker's
metrics listener on its advertised host) or `--broker-metrics ID=URL` adds each broker's
CPU, memory and connections from its endpoint; without them the CPU column is left out.

Rates and trends need two looks: each refresh compares with the one before; `--once` takes
two, `--interval` seconds apart, and prints one snapshot (a table, or with `--json` one
document).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
from kafkactl.cli._output import print_table

SORT_KEYS = ("in", "out", "lag", "name")
LATEST = -1


@dataclass
class Look:
    """One look at the cluster: counters are cumulative, compared between two looks."""

    at: float
    cluster_id: str | None = None
    controller_id: int = -1
    brokers: list[dict[str, Any]] = field(default_factory=list)
    under_replicated: dict[str, list[int]] = field(default_factory=dict)
    offline: dict[str, list[int]] = field(default_factory=dict)
    # None: not known (no source answered)
    under_replicated_count: int | None = 0
    offline_count: int | None = 0
    # topic -> {"partitions": n, and cumulative counters: "in_msgs", "in_bytes", "out_bytes",
    # "consumed_msgs"}
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    # group -> {"state", "members", "lag", "committed"}
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    # broker key -> cumulative CPU seconds (metrics source)
    cpu: dict[str, float] = field(default_factory=dict)
    # why the cluster could not be looked at (live view: the brokers are shown down)
    error: str | None = None

    @property
    def answered(self) -> bool:
        """Whether any source answered this look."""
        return self.error is None and any(b["up"] for b in self.brokers)


def unreachable(before: Look | None, error: str) -> Look:
    """A look at a cluster that could not be reached: the brokers of the look before, all
    down; its figures not known."""
    look = Look(time.monotonic(), before.cluster_id if before else None,
                under_replicated_count=None, offline_count=None, error=error)
    for b in before.brokers if before is not None else ():
        look.brokers.append({**{k: b[k] for k in ("id", "host", "port") if k in b},
                             "up": False, "controller": False})
    return look


# ---- the Kafka protocol ---------------------------------------------------------------------
def look_protocol(client: Any) -> Look:
    from kafkactl.client.group.group_admin import GroupAdmin

    cluster = client.refresh_metadata(None)
    look = Look(time.monotonic(), cluster.cluster_id, cluster.controller_id)
    up = set(cluster.brokers)
    expected = set(up)
    leaders: dict[int, list[tuple[str, int]]] = {}
    for name, topic in sorted(cluster.topics.items()):
        look.topics[name] = {"partitions": len(topic.partitions), "internal": topic.is_internal}
        for p in topic.partitions.values():
            expected.update(p.replicas)
            if p.leader < 0 or p.leader not in up:
                look.offline.setdefault(name, []).append(p.partition)
                continue
            if len(p.isr) < len(p.replicas):
                look.under_replicated.setdefault(name, []).append(p.partition)
            leaders.setdefault(p.leader, []).append((name, p.partition))
    look.offline_count = sum(map(len, look.offline.values()))
    look.under_replicated_count = sum(map(len, look.under_replicated.values()))
    for b in sorted(expected):
        meta = cluster.brokers.get(b)
        look.brokers.append({
            "id": b, "host": meta.host if meta else None, "port": meta.port if meta else None,
            "up": b in up, "controller": b == cluster.controller_id})
    ends = _end_offsets(client, leaders)
    for (name, _p), end in ends.items():
        look.topics[name]["in_msgs"] = look.topics[name].get("in_msgs", 0) + end
    admin = GroupAdmin(client)
    try:
        groups = admin.list_groups()
    except Exception:  # a broker that cannot list its groups: the rest still shows
        groups = []
    for group_id, _protocol_type, state in groups:
        entry: dict[str, Any] = {"state": state, "members": None, "lag": 0, "committed": 0}
        try:
            entry["members"] = len(admin.describe_group(group_id).members)
            committed = admin.fetch_offsets(group_id)
        except Exception as e:
            entry["error"] = str(e)
            look.groups[group_id] = entry
            continue
        for tp, offset in committed.items():
            if offset < 0 or tp not in ends:
                continue
            entry["lag"] += max(ends[tp] - offset, 0)
            entry["committed"] += offset
            topic = look.topics.get(tp[0])
            if topic is not None:
                topic["consumed_msgs"] = topic.get("consumed_msgs", 0) + offset
        look.groups[group_id] = entry
    return look


def _end_offsets(client: Any, leaders: dict[int, list[tuple[str, int]]]
                 ) -> dict[tuple[str, int], int]:
    """Log end offsets, one ListOffsets per leader; a leader that does not answer is left
    out (its partitions show no rate)."""
    from kafkactl.client.consumer import SimpleConsumer

    reader = SimpleConsumer(client=client)
    out: dict[tuple[str, int], int] = {}
    for _leader, tps in sorted(leaders.items()):
        try:
            found = reader.list_offsets(dict.fromkeys(tps, LATEST))
        except Exception:
            continue
        out.update({tp: off for tp, (off, _ts) in found.items() if off >= 0})
    return out


def add_broker_processes(look: Look, urls: dict[int, str]) -> None:
    """The protocol source's brokers: CPU (cumulative, a rate between two looks), memory
    and connections from each broker's metrics endpoint, where one is known."""
    for broker in look.brokers:
        url = urls.get(broker["id"])
        if url is None:
            continue
        broker.update(metrics=url, cpu_percent=None, rss_bytes=None, connections=None)
        if not broker["up"]:
            continue
        try:
            s = scrape(url, timeout=5.0)
        except (OSError, ValueError) as e:
            broker["metrics_error"] = str(getattr(e, "reason", e))
            continue
        look.cpu[url] = _value(s, "process_cpu_seconds_total")
        broker.update(
            rss_bytes=int(_value(s, "process_resident_memory_bytes")),
            connections=int(_value(s, "kafka_server_socket_server_metrics_connection_count")))


def broker_metrics_urls(look: Look, port: int | None, given: dict[int, str]
                        ) -> dict[int, str]:
    """Broker id -> metrics URL: those given, else the broker's host at `port`."""
    out = dict(given)
    if port is not None:
        for b in look.brokers:
            if b["id"] not in out and b.get("host"):
                out[b["id"]] = f"http://{b['host']}:{port}/metrics"
    return out


# ---- the metrics endpoints ------------------------------------------------------------------
def scrape(url: str, timeout: float = 10.0) -> dict[str, list[tuple[dict[str, str], float]]]:
    """name -> [(labels, value)] of one /metrics endpoint."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - the user's URL
        text = r.read().decode("utf-8")
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


def _value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str) -> float:
    return sum(v for _labels, v in samples.get(name, ()))


def look_metrics(urls: list[str]) -> Look:
    """One look at the endpoints; an endpoint that does not answer is a broker down, and
    when none answers the partition counts are not known (None)."""
    look = Look(time.monotonic(), under_replicated_count=None, offline_count=None)
    for url in urls:
        broker: dict[str, Any] = {"endpoint": url, "up": False, "controller": False}
        look.brokers.append(broker)
        try:
            s = scrape(url)
        except (OSError, ValueError) as e:
            broker["error"] = str(getattr(e, "reason", e))
            continue
        broker.update(
            up=True,
            controller=_value(s, "kafka_controller_kafkacontroller_activecontrollercount") > 0,
            partitions=int(_value(s, "kafka_server_replicamanager_partitioncount")),
            leaders=int(_value(s, "kafka_server_replicamanager_leadercount")),
            connections=int(_value(s, "kafka_server_socket_server_metrics_connection_count")),
            rss_bytes=int(_value(s, "process_resident_memory_bytes")),
            cpu_percent=None)
        look.cpu[url] = _value(s, "process_cpu_seconds_total")
        look.under_replicated_count = (look.under_replicated_count or 0) + int(
            _value(s, "kafka_server_replicamanager_underreplicatedpartitions"))
        look.offline_count = (look.offline_count or 0) + int(
            _value(s, "kafka_controller_kafkacontroller_offlinepartitionscount"))
        for metric, key in (("kafka_server_brokertopicmetrics_messagesin_total", "in_msgs"),
                            ("kafka_server_brokertopicmetrics_bytesin_total", "in_bytes"),
                            ("kafka_server_brokertopicmetrics_bytesout_total", "out_bytes")):
            for labels, v in s.get(metric, ()):
                if "topic" in labels:
                    topic = look.topics.setdefault(labels["topic"], {"partitions": 0})
                    topic[key] = topic.get(key, 0) + v
        for labels, _v in s.get("kafka_log_log_logendoffset", ()):
            topic = look.topics.setdefault(labels["topic"], {"partitions": 0})
            topic["internal"] = labels["topic"].startswith("__")
            topic["partitions"] += 1  # every replica: the cluster's partition count x RF
        for labels, v in s.get("kafka_consumergroup_group_sum_lag", ()):
            group = look.groups.setdefault(labels["group"], {"state": None, "members": None,
                                                            "lag": 0, "committed": 0})
            group["lag"] += int(v)
        for labels, v in s.get("kafka_consumergroup_group_offset", ()):
            group = look.groups.setdefault(labels["group"], {"state": None, "members": None,
                                                            "lag": 0, "committed": 0})
            group["committed"] += int(v)
            topic = look.topics.setdefault(labels["topic"], {"partitions": 0})
            topic["consumed_msgs"] = topic.get("consumed_msgs", 0) + v
    return look


# ---- two looks: one snapshot --------------------------------------------------------------
def _rate(now: dict[str, Any], before: dict[str, Any] | None, key: str,
          elapsed: float) -> float | None:
    if before is None or key not in now or key not in before or elapsed <= 0:
        return None
    return round(max(now[key] - before[key], 0) / elapsed, 3)


def snapshot(now: Look, before: Look | None, source: str, sort: str = "in") -> dict[str, Any]:
    """The JSON document (and what the table shows) from two looks."""
    elapsed = now.at - before.at if before is not None else 0.0
    topics = []
    for name, t in now.topics.items():
        if t.get("internal"):
            continue
        prev = before.topics.get(name) if before is not None else None
        topics.append({
            "topic": name, "partitions": t.get("partitions", 0),
            "in_msgs_per_s": _rate(t, prev, "in_msgs", elapsed),
            "in_bytes_per_s": _rate(t, prev, "in_bytes", elapsed),
            "out_bytes_per_s": _rate(t, prev, "out_bytes", elapsed),
            "consumed_msgs_per_s": _rate(t, prev, "consumed_msgs", elapsed),
        })
    groups = []
    for name, g in now.groups.items():
        prev = before.groups.get(name) if before is not None else None
        change = None if prev is None or elapsed <= 0 else round(
            (g["lag"] - prev["lag"]) / elapsed, 3)
        trend = None if change is None else ("growing" if change > 0 else
                                             "shrinking" if change < 0 else "steady")
        entry = {"group": name, "state": g.get("state"), "members": g.get("members"),
                 "lag": g["lag"], "lag_change_per_s": change, "trend": trend}
        if "error" in g:
            entry["error"] = g["error"]
        groups.append(entry)
    brokers = [dict(b) for b in now.brokers]
    for b in brokers:
        key = b.get("endpoint") or b.get("metrics")
        if key in now.cpu and before is not None and key in before.cpu and elapsed > 0:
            b["cpu_percent"] = round(max(now.cpu[key] - before.cpu[key], 0) / elapsed * 100, 1)
    _sort(topics, groups, sort)
    doc: dict[str, Any] = {
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": source,
        "interval_s": round(elapsed, 3) if before is not None else None,
        "brokers": brokers,
        "under_replicated": now.under_replicated_count,
        "offline": now.offline_count,
        "topics": topics,
        "groups": groups,
    }
    if now.error is not None:
        doc["error"] = now.error
    if source == "protocol":
        doc["cluster_id"] = now.cluster_id
        doc["controller_id"] = now.controller_id
        doc["under_replicated_partitions"] = now.under_replicated
        doc["offline_partitions"] = now.offline
    return doc


def _sort(topics: list[dict[str, Any]], groups: list[dict[str, Any]], sort: str) -> None:
    if sort == "name":
        topics.sort(key=lambda t: t["topic"])
        groups.sort(key=lambda g: g["group"])
        return
    key = "out_bytes_per_s" if sort == "out" else "in_msgs_per_s"
    if sort == "out" and all(t[key] is None for t in topics):
        key = "consumed_msgs_per_s"
    topics.sort(key=lambda t: (-(t[key] or 0), t["topic"]))
    groups.sort(key=lambda g: (-g["lag"], g["group"]))


# ---- rendering ------------------------------------------------------------------------------
def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}{unit}"
    return f"{value:,}{unit}"


def render(doc: dict[str, Any]) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text(f"kafkactl top  {doc['time']}  source: {doc['source']}"
                + (f"  controller: {doc['controller_id']}" if "controller_id" in doc else ""))
    known = doc["under_replicated"] is not None and doc["offline"] is not None
    health = Text(f"under-replicated partitions: {_fmt(doc['under_replicated'])}   "
                  f"offline partitions: {_fmt(doc['offline'])}",
                  style="bold red" if doc["under_replicated"] or doc["offline"] or not known
                  else "green")
    if doc.get("error"):
        health.append(f"\n{doc['error']}", style="bold red")
    brokers = Table(title="Brokers", title_justify="left", expand=False)
    metrics = doc["source"] == "metrics"
    processes = not metrics and any("metrics" in b for b in doc["brokers"])
    for col in (("endpoint",) if metrics else ("id", "address")):
        brokers.add_column(col)
    brokers.add_column("up")
    brokers.add_column("controller")
    if metrics:
        for col in ("cpu %", "rss MiB", "connections", "partitions", "leaders"):
            brokers.add_column(col, justify="right")
    elif processes:
        for col in ("cpu %", "rss MiB", "connections"):
            brokers.add_column(col, justify="right")
    for b in doc["brokers"]:
        up = Text("up", style="green") if b["up"] else Text("DOWN", style="bold red")
        ctl = "yes" if b["controller"] else ""
        if metrics:
            rss = b.get("rss_bytes")
            endpoint = b["endpoint"].partition("://")[2].partition("/")[0]
            brokers.add_row(endpoint, up, ctl, _fmt(b.get("cpu_percent")),
                            _fmt(None if rss is None else rss / 2**20),
                            _fmt(b.get("connections")), _fmt(b.get("partitions")),
                            _fmt(b.get("leaders")))
        else:
            address = f"{b['host']}:{b['port']}" if b.get("host") else "-"
            extra = []
            if processes:
                rss = b.get("rss_bytes")
                extra = [_fmt(b.get("cpu_percent")),
                         _fmt(None if rss is None else rss / 2**20), _fmt(b.get("connections"))]
            brokers.add_row(str(b["id"]), address, up, ctl, *extra)
    topics = Table(title="Topics", title_justify="left")
    for col, justify in (("topic", "left"), ("partitions", "right"), ("in msg/s", "right"),
                         ("in B/s", "right"), ("out B/s", "right"),
                         ("consumed msg/s", "right")):
        topics.add_column(col, justify=justify)  # type: ignore[arg-type]
    for t in doc["topics"]:
        topics.add_row(t["topic"], _fmt(t["partitions"]), _fmt(t["in_msgs_per_s"]),
                       _fmt(t["in_bytes_per_s"]), _fmt(t["out_bytes_per_s"]),
                       _fmt(t["consumed_msgs_per_s"]))
    groups = Table(title="Consumer groups", title_justify="left")
    for col, justify in (("group", "left"), ("state", "left"), ("members", "right"),
                         ("lag", "right"), ("lag/s", "right"), ("trend", "left")):
        groups.add_column(col, justify=justify)  # type: ignore[arg-type]
    for g in doc["groups"]:
        trend = g["trend"] or "-"
        groups.add_row(g["group"], g["state"] or "-", _fmt(g["members"]), _fmt(g["lag"]),
                       _fmt(g["lag_change_per_s"]),
                       Text(trend, style="red" if trend == "growing" else ""))
    return Group(head, health, brokers, topics, groups)


# ---- the command ----------------------------------------------------------------------------
def top(
    once: bool = typer.Option(False, "--once", help="Print one snapshot and exit (two looks "
                              "--interval seconds apart, for the rates)."),
    as_json: bool = typer.Option(False, "--json", help="JSON instead of tables (with --once: "
                                 "one document; live: one document a line per refresh)."),
    sort: str = typer.Option("in", "--sort", "-s", metavar="|".join(SORT_KEYS),
                             help="Order topics by in rate, out rate or name; groups by lag "
                                  "(or name)."),
    interval: float = typer.Option(2.0, "--interval", "-i", min=0.1, metavar="SECONDS",
                                   help="Seconds between refreshes."),
    metrics_urls: list[str] = typer.Option(
        [], "--metrics", metavar="URL",
        help="A broker's metrics endpoint (http://HOST:PORT/metrics; repeat once per "
             "broker): read it instead of the Kafka protocol."),
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", min=1, max=65535, metavar="PORT",
        help="With the Kafka protocol: every broker's metrics listener port (on the "
             "broker's advertised host), for per-broker CPU, memory and connections: the "
             "protocol has no CPU figure, only a broker's --metrics endpoint does."),
    broker_metrics: list[str] = typer.Option(
        [], "--broker-metrics", metavar="ID=URL",
        help="With the Kafka protocol: broker ID's metrics endpoint (HOST:PORT or a URL; "
             "repeatable), for its CPU, memory and connections."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """A live view of a broker or cluster: brokers, topic rates, unhealthy partitions and
    consumer lag (Ctrl-C quits). A broker's CPU comes from its metrics endpoint (serve
    --metrics): give --metrics, or --metrics-port / --broker-metrics with the protocol."""
    if sort not in SORT_KEYS:
        raise typer.BadParameter(f"must be one of {', '.join(SORT_KEYS)}", param_hint="--sort")
    urls = [_metrics_url(u) for u in metrics_urls]
    if urls and (metrics_port is not None or broker_metrics):
        raise typer.BadParameter("with --metrics every figure comes from the endpoints; "
                                 "--metrics-port and --broker-metrics are for the protocol",
                                 param_hint="--metrics")
    processes = (metrics_port, _broker_metrics(broker_metrics))
    client: Any = None
    if not urls:
        from kafkactl.client.kafka_client import KafkaClient

        client = KafkaClient(bootstrap, client_id="kafkactl-top",
                             security=client_security(prop, command_config),
                             request_timeout_ms=10000)
    source = "metrics" if urls else "protocol"
    try:
        if once:
            before = _look(client, urls, processes)
            time.sleep(interval)
            now = _look(client, urls, processes)
            doc = snapshot(now, before, source, sort)
            if as_json:
                typer.echo(json.dumps(doc, indent=1))
            else:  # full width when piped, as every command's tables
                print_table(render(doc))
            if not now.answered:  # only the metrics source gets here: every endpoint down
                raise fail("no metrics endpoint answered: "
                           + "; ".join(f"{b['endpoint']}: {b.get('error', 'down')}"
                                       for b in now.brokers))
            return
        _live(client, urls, source, sort, interval, as_json, processes)
    except KeyboardInterrupt:
        pass
    finally:
        if client is not None:
            client.close()


# the protocol source's metrics endpoints: (--metrics-port, --broker-metrics by id)
Processes = tuple[int | None, dict[int, str]]


def _look(client: Any, urls: list[str], processes: Processes = (None, {}),
          before: Look | None = None, *, live: bool = False) -> Look:
    """One look; the cluster not reached fails (exit 1), or in the `live` view is a look
    with the brokers of `before` down (the next look tries again)."""
    from kafkactl.client.errors import (
        ClientError,
        KafkaConnectionError,
        KafkaTimeoutError,
        NoBrokersAvailable,
    )
    from kafkactl.protocol.errors import KafkaError

    if urls:
        return look_metrics(urls)
    try:
        look = look_protocol(client)
    except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable, OSError) as e:
        if not live:
            raise fail(f"cannot reach the cluster: {e}") from None
        return unreachable(before, f"cannot reach the cluster: {e}")
    except (ClientError, KafkaError) as e:  # refused credentials...: no use trying again
        raise fail(f"cannot reach the cluster: {e}") from None
    port, given = processes
    if port is not None or given:
        add_broker_processes(look, broker_metrics_urls(look, port, given))
    return look


def _broker_metrics(values: list[str]) -> dict[int, str]:
    out = {}
    for value in values:
        bid, sep, url = value.partition("=")
        try:
            key = int(bid)
        except ValueError:
            key = -1
        if not sep or key < 0 or not url:
            raise typer.BadParameter(f"{value!r}: give ID=HOST:PORT or ID=URL",
                                     param_hint="--broker-metrics")
        out[key] = _metrics_url(url, "--broker-metrics")
    return out


def _live(client: Any, urls: list[str], source: str, sort: str, interval: float,
          as_json: bool, processes: Processes) -> None:
    """Refresh until interrupted: a cluster that cannot be reached (a broker restarting)
    shows its brokers down, and the view picks up again when it answers; the rates compare
    with the last look that answered."""
    before = _look(client, urls, processes, live=True)
    last = before

    def refresh() -> dict[str, Any]:
        nonlocal before, last
        time.sleep(interval)
        now = _look(client, urls, processes, last, live=True)
        doc = snapshot(now, before, source, sort)
        if now.error is None or before.error is not None:
            before = now
        last = now  # (a look that failed keeps the brokers of the one before it)
        return doc

    if as_json:
        while True:
            typer.echo(json.dumps(refresh()))
    from rich.live import Live

    with Live(render(snapshot(before, None, source, sort)), auto_refresh=False,
              screen=False) as live:
        while True:
            live.update(render(refresh()), refresh=True)


def _metrics_url(value: str, option: str = "--metrics") -> str:
    """HOST:PORT or a URL; the path defaults to /metrics."""
    url = value if "://" in value else f"http://{value}"
    if not url.startswith(("http://", "https://")):
        raise typer.BadParameter(f"{value!r} is not an http(s) URL", param_hint=option)
    rest = url.partition("://")[2]
    if "/" not in rest:
        url += "/metrics"
    return url


def register(app: typer.Typer) -> None:
    app.command("top")(top)
