"""`kafkactl top --metrics`: a look at the brokers' metrics endpoints (`serve --metrics`), all
scraped at once and each for at most the look's timeout. An endpoint that does not answer
in time is a broker not answering in that look (its counters left out of the rates of that
look and of the next: kafkactl.cli.top_look).

Also the protocol source's per-broker process figures (CPU, memory, connections), which only
a broker's metrics endpoint tells.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from functools import partial
from typing import Any

from kafkactl.cli.top_bounded import Answers, Asker
from kafkactl.cli.top_look import Look

# name -> [(labels, value)] of one /metrics endpoint
Scrape = dict[str, list[tuple[dict[str, str], float]]]


def scrape(url: str, timeout: float = 10.0) -> Scrape:
    """name -> [(labels, value)] of one /metrics endpoint."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - the user's URL
        text = r.read().decode("utf-8")
    out: Scrape = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


def value(samples: Scrape, name: str) -> float:
    return sum(v for _labels, v in samples.get(name, ()))


def not_answering(timeout: float) -> str:
    return f"did not answer within {timeout:g} s"


def why(answers: Answers[Any], key: Hashable, timeout: float) -> str:
    """Why `key` has no result in `answers`: not answering in time (whether the look's
    deadline or the request's own timeout came first), or the error it answered."""
    from kafkactl.client.errors import KafkaTimeoutError

    error = answers.errors.get(key)
    if error is None:
        return not_answering(timeout)
    reason = getattr(error, "reason", error)  # urllib's URLError wraps the socket's
    if isinstance(reason, (TimeoutError, KafkaTimeoutError)):
        return not_answering(timeout)
    return str(reason)


def scrape_all(asker: Asker, urls: list[str], timeout: float) -> Answers[str]:
    """Every endpoint scraped at once, each for at most `timeout` seconds."""
    calls: dict[str, Callable[[], Any]] = {url: partial(scrape, url, timeout) for url in urls}
    return asker.ask(calls, timeout)


def look_metrics(asker: Asker, urls: list[str], timeout: float) -> Look:
    """One look at the endpoints."""
    answers = scrape_all(asker, urls, timeout)
    scrapes: dict[str, Scrape | str] = {}
    for url in urls:
        scrapes[url] = answers.results[url] if url in answers.results else \
            why(answers, url, timeout)
    last = answers.last_answer()
    return metrics_look(scrapes, asker.clock() if last is None else last)


def metrics_look(scrapes: Mapping[str, Scrape | str], at: float) -> Look:
    """A look from each endpoint's scrape, or why it did not answer (a broker not
    answering); when none answered the partition counts are not known (None)."""
    look = Look(at, under_replicated_count=None, offline_count=None)
    replicas: dict[str, set[str]] = {}  # topic -> its partitions seen (on any broker)
    for url, s in scrapes.items():
        broker: dict[str, Any] = {"endpoint": url, "up": False, "controller": False}
        look.brokers.append(broker)
        if isinstance(s, str):
            broker["error"] = s
            continue
        broker.update(
            up=True,
            controller=value(s, "kafka_controller_kafkacontroller_activecontrollercount") > 0,
            partitions=int(value(s, "kafka_server_replicamanager_partitioncount")),
            leaders=int(value(s, "kafka_server_replicamanager_leadercount")),
            connections=int(value(s, "kafka_server_socket_server_metrics_connection_count")),
            rss_bytes=int(value(s, "process_resident_memory_bytes")),
            cpu_percent=None)
        look.cpu[url] = value(s, "process_cpu_seconds_total")
        look.under_replicated_count = (look.under_replicated_count or 0) + int(
            value(s, "kafka_server_replicamanager_underreplicatedpartitions"))
        look.offline_count = (look.offline_count or 0) + int(
            value(s, "kafka_controller_kafkacontroller_offlinepartitionscount"))
        for metric, counter in (
                ("kafka_server_brokertopicmetrics_messagesin_total", "in_msgs"),
                ("kafka_server_brokertopicmetrics_bytesin_total", "in_bytes"),
                ("kafka_server_brokertopicmetrics_bytesout_total", "out_bytes")):
            for labels, v in s.get(metric, ()):
                if "topic" in labels:
                    look.count(labels["topic"], counter, url, v)
        for labels, _v in s.get("kafka_log_log_logendoffset", ()):
            look.topic(labels["topic"])
            replicas.setdefault(labels["topic"], set()).add(labels["partition"])
        for labels, v in s.get("kafka_consumergroup_group_lag", ()):
            look.group(labels["group"])
            look.lags[labels["group"]][(url, labels["topic"], labels["partition"])] = v
        for labels, v in s.get("kafka_consumergroup_group_offset", ()):
            look.group(labels["group"])
            if v >= 0:
                look.count(labels["topic"], "consumed_msgs",
                           (url, labels["group"], labels["partition"]), v)
    for topic, partitions in replicas.items():  # partitions, not replicas (x RF)
        look.topics[topic]["partitions"] = len(partitions)
    return look


def process_figures(broker: dict[str, Any], url: str, answers: Answers[Any], key: Hashable,
                    timeout: float, cpu: dict[str, float]) -> None:
    """The protocol source's broker entry: CPU (cumulative, a rate between two looks),
    memory and connections from its metrics endpoint's scrape in `answers` under `key`."""
    broker.update(metrics=url, cpu_percent=None, rss_bytes=None, connections=None)
    if not broker["up"]:
        return
    s = answers.results.get(key)
    if s is None:
        broker["metrics_error"] = why(answers, key, timeout)
        return
    cpu[url] = value(s, "process_cpu_seconds_total")
    broker.update(
        rss_bytes=int(value(s, "process_resident_memory_bytes")),
        connections=int(value(s, "kafka_server_socket_server_metrics_connection_count")))


def broker_metrics_urls(brokers: Mapping[int, tuple[str, int]], port: int | None,
                        given: Mapping[int, str]) -> dict[int, str]:
    """Broker id -> metrics URL: those given, else the broker's host (`brokers`: id ->
    (host, port)) at `port`."""
    out = dict(given)
    if port is not None:
        for bid, (host, _port) in brokers.items():
            if bid not in out and host:
                out[bid] = f"http://{host}:{port}/metrics"
    return out
