"""`kafkactl top`'s rate arithmetic on recorded looks (kafkactl.cli.top_look): a counter's
rate is computed per series (a broker's endpoint, a partition) and summed, each series only
when it is in both looks and did not go down; the metrics source counts partitions, not
replicas; the protocol source leaves out the partitions of a leader that did not answer;
and the bounded asker (kafkactl.cli.top_bounded) reports a question still running at the
deadline as unanswered, and the look's time as its last answer's. (The same against real
brokers: tests/cli/test_top_not_answering.py.)"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from kafkactl.cli.top_bounded import Asker
from kafkactl.cli.top_look import counter_rate, gauge_change, snapshot
from kafkactl.cli.top_metrics import Scrape, metrics_look
from kafkactl.cli.top_output import plain_text
from kafkactl.cli.top_protocol import BrokerAnswer, build_look
from kafkactl.cli.top_render import render
from kafkactl.client.cluster import ClusterMetadata

A, B, C = (f"http://127.0.0.1:{p}/metrics" for p in (22301, 22302, 22303))


def scraped(messages: float, partitions: list[int], leads: bool = True) -> Scrape:
    """One broker's scrape: topic ev's MessagesIn (where it leads) and its replicas."""
    out: Scrape = {
        "kafka_log_log_logendoffset": [({"topic": "ev", "partition": str(p)}, 100.0)
                                       for p in partitions]}
    if leads:
        out["kafka_server_brokertopicmetrics_messagesin_total"] = [
            ({}, messages), ({"topic": "ev"}, messages)]
        out["kafka_server_brokertopicmetrics_bytesin_total"] = [({"topic": "ev"},
                                                                 messages * 100)]
    return out


def ev(doc: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {t["topic"]: t for t in doc["topics"]}["ev"]
    return found


def test_counter_rate_per_series() -> None:
    assert counter_rate({"a": 10, "b": 20}, {"a": 4, "b": 20}, 2.0) == 3.0
    # b missing before (it did not answer): left out, not counted whole
    assert counter_rate({"a": 10, "b": 5000}, {"a": 10}, 2.0) == 0.0
    # b went down (a restart): left out
    assert counter_rate({"a": 12, "b": 3}, {"a": 10, "b": 5000}, 2.0) == 1.0
    assert counter_rate({"b": 3}, {"b": 5000}, 2.0) is None
    assert counter_rate({"a": 1}, None, 2.0) is None
    assert counter_rate({"a": 1}, {"a": 0}, 0.0) is None
    assert gauge_change({"p0": 6, "p1": 9}, {"p0": 4}, 2.0) == 1.0
    assert gauge_change({}, {}, 2.0) == 0.0
    assert gauge_change({"p1": 1}, {"p0": 1}, 2.0) is None


def test_an_endpoint_that_stops_answering_and_comes_back_makes_no_false_rate() -> None:
    """The tester's scrapes: no traffic, broker 2 paused for one look."""
    everyone = {A: scraped(20000, [0, 1, 2, 3, 4, 5]), B: scraped(10051, [0, 1, 2, 3, 4, 5]),
                C: scraped(30000, [0, 1, 2, 3, 4, 5])}
    first = metrics_look(everyone, at=100.0)
    silent = metrics_look({**everyone, B: "did not answer within 2 s"}, at=102.0)
    back = metrics_look(everyone, at=104.0)
    for now, before in ((silent, first), (back, silent), (back, first)):
        doc = snapshot(now, before, "metrics")
        assert ev(doc)["in_msgs_per_s"] == 0.0 and ev(doc)["in_bytes_per_s"] == 0.0, doc
        assert doc["interval_s"] == now.at - before.at
    doc = snapshot(silent, first, "metrics")
    assert [b["up"] for b in doc["brokers"]] == [True, False, True]
    assert doc["brokers"][1]["error"] == "did not answer within 2 s"
    table = plain_text(render(doc))
    assert "no answer" in table and table.count("│ up ") == 2, table
    # traffic on the others still counts while one is silent
    busier = metrics_look({A: scraped(20010, [0]), B: "did not answer within 2 s",
                           C: scraped(30010, [0])}, at=104.0)
    assert ev(snapshot(busier, silent, "metrics"))["in_msgs_per_s"] == 10.0


def test_partitions_not_replicas() -> None:
    look = metrics_look({A: scraped(1, [0, 1, 2, 3, 4, 5]),
                         B: scraped(1, [0, 1, 2, 3, 4, 5], leads=False),
                         C: scraped(1, [0, 1, 2, 3, 4, 5], leads=False)}, at=1.0)
    assert ev(snapshot(look, None, "metrics"))["partitions"] == 6


def metadata(leaders: dict[int, int]) -> ClusterMetadata:
    md = ClusterMetadata()
    md.update({"brokers": [{"node_id": b, "host": "127.0.0.1", "port": 9090 + b}
                           for b in (1, 2, 3)], "controller_id": 1,
               "topics": [{"name": "ev", "error_code": 0, "partitions": [
                   {"partition_index": p, "leader_id": b, "replica_nodes": [1, 2, 3],
                    "isr_nodes": [1, 2, 3], "error_code": 0}
                   for p, b in leaders.items()]}]}, all_topics=True)
    return md


def test_protocol_leaves_out_the_partitions_of_a_leader_that_did_not_answer() -> None:
    md = metadata({0: 1, 1: 2, 2: 3})
    ends = {1: {("ev", 0): 500}, 2: {("ev", 1): 7000}, 3: {("ev", 2): 900}}
    answers = {b: BrokerAnswer(md, ends[b]) for b in (1, 2, 3)}
    first = build_look(answers, {}, at=10.0)
    silent = build_look({b: a for b, a in answers.items() if b != 2},
                        {2: "did not answer within 2 s"}, at=12.0)
    back = build_look(answers, {}, at=14.0)
    for now, before in ((silent, first), (back, silent)):
        doc = snapshot(now, before, "protocol")
        assert ev(doc)["in_msgs_per_s"] == 0.0 and ev(doc)["partitions"] == 3, doc
    doc = snapshot(silent, first, "protocol")
    two = {b["id"]: b for b in doc["brokers"]}[2]
    assert two["up"] is False and two["error"] == "did not answer within 2 s"
    assert two["host"] == "127.0.0.1"  # registered, not answering


def test_asker_does_not_wait_past_its_deadline() -> None:
    release = threading.Event()
    ticks = itertools.count()
    asker = Asker(clock=lambda: float(next(ticks)))

    def hang() -> str:
        release.wait(60)
        return "late"

    def fail() -> str:
        raise OSError("refused")

    try:
        answers = asker.ask({"quick": lambda: "ok", "broken": fail}, 60)  # both come back
        assert answers.results == {"quick": "ok"} and not answers.unanswered
        assert isinstance(answers.errors["broken"], OSError)
        assert answers.last_answer() == answers.answered_at["quick"]
        answers = asker.ask({"hung": hang, "quick": lambda: "ok"}, 0.01)
        assert "hung" in answers.unanswered and "hung" not in answers.results
        # the hung question still runs: not asked again, not answering at once
        again = asker.ask({"hung": hang}, 60)
        assert again.unanswered == {"hung"} and not again.results
    finally:
        release.set()
