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
document). A rate is computed per broker (per partition with the protocol) and then summed:
a broker that did not answer one of the two looks is left out of it (kafkactl.cli.top_look).

Each look asks every broker (or endpoint) at once and waits at most the refresh interval,
within 2 to 5 s: a broker that has not answered by then is shown not answering in that look
instead of freezing the view.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
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
from kafkactl.cli._output import print_table, stdout_console
from kafkactl.cli.top_bounded import Asker
from kafkactl.cli.top_look import Look, snapshot, unreachable
from kafkactl.cli.top_metrics import look_metrics
from kafkactl.cli.top_output import plain_text, stopped_by_signals, write_frame
from kafkactl.cli.top_render import render

if TYPE_CHECKING:
    from kafkactl.cli.top_protocol import ClusterProbe

SORT_KEYS = ("in", "out", "lag", "name")
# how long a look waits for the brokers' answers: the refresh interval, within these bounds
# (a broker that answers later is shown not answering in that look)
LOOK_TIMEOUT_MIN_S = 2.0
LOOK_TIMEOUT_MAX_S = 5.0


def look_timeout(interval: float) -> float:
    return min(max(interval, LOOK_TIMEOUT_MIN_S), LOOK_TIMEOUT_MAX_S)


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
    given = _broker_metrics(broker_metrics)
    timeout = look_timeout(interval)
    asker = Asker()
    looker: Looker
    if urls:
        def looker(before: Look | None, live: bool) -> Look:
            return look_metrics(asker, urls, timeout)
    else:
        from kafkactl.cli.top_protocol import ClusterProbe

        probe = ClusterProbe(bootstrap, client_security(prop, command_config), timeout,
                             metrics_port, given, asker)

        def looker(before: Look | None, live: bool) -> Look:
            return _look_protocol(probe, before, live)
    source = "metrics" if urls else "protocol"
    with stopped_by_signals():
        try:
            if once:
                before = looker(None, False)
                time.sleep(interval)
                now = looker(before, False)
                doc = snapshot(now, before, source, sort)
                if as_json:
                    typer.echo(json.dumps(doc, indent=1))
                else:  # full width when piped, as every command's tables
                    print_table(render(doc))
                if not now.answered:  # only the metrics source gets here: all endpoints down
                    raise fail("no metrics endpoint answered: "
                               + "; ".join(f"{b['endpoint']}: {b.get('error', 'down')}"
                                           for b in now.brokers))
                return
            _live(looker, source, sort, interval, as_json)
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM: the view ends, status 0
            pass


# one look: (the look before, live view?) -> the look
Looker = Callable[[Look | None, bool], Look]


def _look_protocol(probe: ClusterProbe, before: Look | None, live: bool) -> Look:
    """One look; the cluster not reached fails (exit 1), or in the `live` view is a look
    with the brokers of `before` down (the next look tries again)."""
    from kafkactl.cli.top_protocol import UNANSWERED, ClusterUnreachable
    from kafkactl.client.errors import ClientError
    from kafkactl.protocol.errors import KafkaError

    try:
        return probe.look()
    except (ClusterUnreachable, *UNANSWERED) as e:
        if not live:
            raise fail(f"cannot reach the cluster: {e}") from None
        return unreachable(before, f"cannot reach the cluster: {e}")
    except (ClientError, KafkaError) as e:  # refused credentials...: no use trying again
        raise fail(f"cannot reach the cluster: {e}") from None


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


def _live(looker: Looker, source: str, sort: str, interval: float, as_json: bool) -> None:
    """Refresh until interrupted: a cluster that cannot be reached (a broker restarting)
    shows its brokers down, and the view picks up again when it answers; the rates compare
    with the last look that answered. On a terminal the tables are redrawn in place;
    piped or redirected, each refresh's tables are printed after the last (plain text,
    flushed), and with --json one document a line."""
    before = looker(None, True)
    last = before

    def refresh() -> dict[str, Any]:
        nonlocal before, last
        time.sleep(interval)
        now = looker(last, True)
        doc = snapshot(now, before, source, sort)
        if now.error is None or before.error is not None:
            before = now
        last = now  # (a look that failed keeps the brokers of the one before it)
        return doc

    if as_json:
        while True:
            write_frame(json.dumps(refresh()) + "\n")
    if not stdout_console().is_terminal:
        write_frame(plain_text(render(snapshot(before, None, source, sort))))
        while True:
            write_frame("\n" + plain_text(render(refresh())))
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
