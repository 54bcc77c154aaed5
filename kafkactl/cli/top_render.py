"""`kafkactl top`'s tables (rich) from one snapshot document (kafkactl.cli.top_look)."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}{unit}"
    return f"{value:,}{unit}"


def _up(broker: dict[str, Any]) -> Any:
    """up; DOWN; or, for a broker registered (or an endpoint listening) that did not answer
    in time, "no answer"."""
    from rich.text import Text

    if broker["up"]:
        return Text("up", style="green")
    if "did not answer" in (broker.get("error") or ""):
        return Text("no answer", style="bold red")
    return Text("DOWN", style="bold red")


def render(doc: dict[str, Any]) -> Any:
    from rich.console import Group
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
    return Group(head, health, _brokers(doc), _topics(doc), _groups(doc))


def _brokers(doc: dict[str, Any]) -> Any:
    from rich.table import Table

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
        up = _up(b)
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
    return brokers


def _topics(doc: dict[str, Any]) -> Any:
    from rich.table import Table

    topics = Table(title="Topics", title_justify="left")
    for col, justify in (("topic", "left"), ("partitions", "right"), ("in msg/s", "right"),
                         ("in B/s", "right"), ("out B/s", "right"),
                         ("consumed msg/s", "right")):
        # a name too long for the terminal folds onto more lines: cut to "orders.eu-…",
        # names differing at the end looked alike
        topics.add_column(col, justify=justify,  # type: ignore[arg-type]
                          overflow="fold" if col == "topic" else "ellipsis")
    for t in doc["topics"]:
        topics.add_row(t["topic"], _fmt(t["partitions"]), _fmt(t["in_msgs_per_s"]),
                       _fmt(t["in_bytes_per_s"]), _fmt(t["out_bytes_per_s"]),
                       _fmt(t["consumed_msgs_per_s"]))
    return topics


def _groups(doc: dict[str, Any]) -> Any:
    from rich.table import Table
    from rich.text import Text

    groups = Table(title="Consumer groups", title_justify="left")
    for col, justify in (("group", "left"), ("state", "left"), ("members", "right"),
                         ("lag", "right"), ("lag/s", "right"), ("trend", "left")):
        groups.add_column(col, justify=justify,  # type: ignore[arg-type]
                          overflow="fold" if col == "group" else "ellipsis")
    for g in doc["groups"]:
        trend = g["trend"] or "-"
        lag = _fmt(g["lag"])
        if g.get("lag_unknown_partitions") and g["lag"] is not None:
            lag += "+"  # at least: some partitions' leaders did not answer
        groups.add_row(g["group"], g["state"] or "-", _fmt(g["members"]), lag,
                       _fmt(g["lag_change_per_s"]),
                       Text(trend, style="red" if trend == "growing" else ""))
    return groups
