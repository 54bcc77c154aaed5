"""`kafkactl top` from the Kafka protocol: each look asks every broker at once, on its own
connection and thread, and waits for them at most the look's timeout (kafkactl.cli.
top_bounded). Each broker is asked what only it can tell: Metadata (brokers, controller,
leaders, ISRs), ListOffsets for the partitions it leads (the in rate is their log end
offsets' growth), ListGroups for the groups it coordinates, then DescribeGroups and
OffsetFetch for them (lag, and the consumed rate as their committed progress).

A broker that is registered but does not answer in time (paused, stuck, cut off while it
keeps its ZooKeeper session) is shown not answering in that look, its partitions' rates
left out and the groups it coordinates shown with their figures not known, instead of the
whole view waiting for it; a broker no longer registered is down, as its metadata says.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkactl.cli.top_bounded import Answers, Asker
from kafkactl.cli.top_look import Look
from kafkactl.cli.top_metrics import broker_metrics_urls, process_figures, scrape, why
from kafkactl.client.cluster import ClusterMetadata
from kafkactl.client.connection import BrokerConnection
from kafkactl.client.errors import KafkaConnectionError, KafkaTimeoutError
from kafkactl.client.fetcher import list_offsets_body, parse_list_offsets
from kafkactl.client.kafka_client import default_bootstrap, parse_bootstrap
from kafkactl.client.security import ClientSecurity
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import error_name

TopicPartition = tuple[str, int]
# a question of a look: ("broker" | "bootstrap" | "metrics", broker id)
Key = tuple[str, int]
LATEST = -1
# what a broker that does not answer raises: said as not answering, the look goes on
UNANSWERED = (KafkaConnectionError, KafkaTimeoutError, OSError)


class ClusterUnreachable(Exception):
    """No broker answered the look."""


@dataclass
class BrokerAnswer:
    """What one broker answered in a look."""

    metadata: ClusterMetadata
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    # group -> {"state", "members", "committed": {tp: offset}[, "error"]}
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    # False: it could not list its groups (ListGroups refused: still loading them)
    groups_known: bool = True


class BrokerProbe:
    """One broker's connection, used by one question at a time (kafkactl.cli.top_bounded
    never starts a key's question while its last one runs)."""

    def __init__(self, node_id: int, host: str, port: int, security: ClientSecurity,
                 timeout: float, client_id: str = "kafkactl-top") -> None:
        self.node_id = node_id  # negative: a bootstrap server, its id not known yet
        self.host = host
        self.port = port
        self.security = security
        self.timeout = timeout
        self.client_id = client_id
        self.conn: BrokerConnection | None = None

    def ask(self) -> BrokerAnswer:
        """On a worker thread: this broker's answers, each request bounded by the look's
        timeout; raises what the connection raised."""
        deadline = time.monotonic() + self.timeout
        conn = self._connection()

        def request(api: ApiKey, body: dict[str, Any], version: int | None = None
                    ) -> dict[str, Any]:
            return conn.request(api, body, version=version,
                                timeout=max(deadline - time.monotonic(), 0.01))

        version = conn.version_for(ApiKey.METADATA)
        metadata = ClusterMetadata()
        metadata.update(request(ApiKey.METADATA, {
            "topics": None if version >= 1 else [], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}, version), all_topics=True)
        answer = BrokerAnswer(metadata)
        if self.node_id < 0:
            return answer  # a bootstrap server: its metadata names the brokers to ask
        led = [(t.name, p.partition) for t in metadata.topics.values()
               for p in t.partitions.values() if p.leader == self.node_id]
        if led:
            found = parse_list_offsets(request(ApiKey.LIST_OFFSETS, list_offsets_body(
                dict.fromkeys(led, LATEST))))
            answer.ends = {tp: off for tp, (code, off, _ts) in found.items()
                           if code == 0 and off >= 0}
        groups = self._groups(conn, request)
        answer.groups = groups or {}
        answer.groups_known = groups is not None
        return answer

    def close(self) -> None:
        """Close the connection (only once no question of it runs)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _connection(self) -> BrokerConnection:
        conn = self.conn
        if conn is None or not conn.connected:
            conn = self.conn = BrokerConnection(
                self.host, self.port, node_id=self.node_id, client_id=self.client_id,
                connect_timeout=self.timeout, request_timeout=self.timeout,
                security=self.security)
            conn.connect()
        return conn

    @staticmethod
    def _groups(conn: BrokerConnection, request: Callable[..., dict[str, Any]]
                ) -> dict[str, dict[str, Any]] | None:
        """The groups this broker coordinates: state, members, committed offsets; None
        from a broker that cannot list them (still loading them)."""
        listed = request(ApiKey.LIST_GROUPS, {"states_filter": []})
        if listed.get("error_code", 0):
            return None
        out: dict[str, dict[str, Any]] = {
            g["group_id"]: {"state": g.get("group_state") or None, "members": None,
                            "committed": {}} for g in listed.get("groups") or ()}
        if not out:
            return out
        described = request(ApiKey.DESCRIBE_GROUPS, {
            "groups": sorted(out), "include_authorized_operations": False})
        for g in described.get("groups") or ():
            entry = out.get(g["group_id"])
            if entry is None:
                continue
            if g["error_code"]:
                entry["error"] = f"DescribeGroups: {error_name(g['error_code'])}"
                continue
            entry.update(state=g["group_state"], members=len(g.get("members") or ()))
        version = min(conn.version_for(ApiKey.OFFSET_FETCH), 7)
        for group_id, entry in out.items():
            if version < 2:  # all of a group's offsets need OffsetFetch v2+
                entry.setdefault("error", "OffsetFetch v2+ is needed")
                continue
            fetched = request(ApiKey.OFFSET_FETCH, {"group_id": group_id, "topics": None,
                                                    "require_stable": False}, version)
            if fetched.get("error_code", 0):
                entry.setdefault("error", f"OffsetFetch: {error_name(fetched['error_code'])}")
                continue
            for t in fetched.get("topics") or ():
                for p in t["partitions"]:
                    if p["error_code"] == 0 and p["committed_offset"] >= 0:
                        entry["committed"][(t["name"], p["partition_index"])] = \
                            p["committed_offset"]
        return out


class ClusterProbe:
    """The cluster's brokers, asked at once every look. Before the first look, and after a
    look nobody answered, the bootstrap servers are asked who the brokers are."""

    def __init__(self, bootstrap: str | None, security: ClientSecurity, timeout: float,
                 metrics_port: int | None = None,
                 broker_metrics: Mapping[int, str] | None = None,
                 asker: Asker | None = None) -> None:
        self.bootstrap = parse_bootstrap(bootstrap or default_bootstrap())
        self.security = security
        self.timeout = timeout
        self.metrics_port = metrics_port
        self.broker_metrics = dict(broker_metrics or {})
        self.asker = asker or Asker()
        self.brokers: dict[int, BrokerProbe] = {}  # by node id
        # the groups seen so far: group -> (its coordinator, its partitions committed)
        self.groups_seen: dict[str, tuple[int, int]] = {}

    def look(self) -> Look:
        """One look; ClusterUnreachable when no broker answered it (the message says why),
        the exception of a broker that refused us (credentials...) as it is."""
        if not self.brokers:
            self._discover()
        probes = dict(self.brokers)
        urls = broker_metrics_urls({b: (p.host, p.port) for b, p in probes.items()},
                                   self.metrics_port, self.broker_metrics)
        calls: dict[Key, Callable[[], Any]] = {("broker", b): p.ask
                                               for b, p in probes.items()}
        calls.update({("metrics", b): _scrape_call(url, self.timeout)
                      for b, url in urls.items()})
        answers = self.asker.ask(calls, self.timeout)
        self._raise_refusal(answers)
        answered = {key[1]: answers.results[key] for key in calls
                    if key[0] == "broker" and key in answers.results}
        if not answered:
            self.brokers.clear()  # the next look asks the bootstrap servers again
            raise ClusterUnreachable(self._nobody(answers, probes))
        at = answers.last_answer({("broker", b) for b in answered})
        look = build_look(answered, {b: why(answers, ("broker", b), self.timeout)
                                     for b in probes if b not in answered},
                          at if at is not None else self.asker.clock())
        self.groups_seen = keep_unanswered_groups(look, answered, self.groups_seen)
        for broker in look.brokers:
            url = urls.get(broker["id"])
            if url is not None:
                process_figures(broker, url, answers, ("metrics", broker["id"]),
                                self.timeout, look.cpu)
        self._follow(answered)
        return look

    def _discover(self) -> None:
        probes = {-1 - i: BrokerProbe(-1 - i, host, port, self.security, self.timeout)
                  for i, (host, port) in enumerate(self.bootstrap)}
        answers = self.asker.ask({("bootstrap", k): p.ask for k, p in probes.items()},
                                 self.timeout)
        for k, probe in probes.items():  # done with them (a hung one: when it gives up)
            if ("bootstrap", k) in answers.answered_at:
                probe.close()
        self._raise_refusal(answers)
        for k in sorted(probes, reverse=True):  # in the order given
            answer = answers.results.get(("bootstrap", k))
            if answer is not None and answer.metadata.brokers:
                self.brokers = {b: self._probe(b, m.host, m.port)
                                for b, m in answer.metadata.brokers.items()}
                return
        raise ClusterUnreachable(self._nobody(answers, probes))

    def _probe(self, node_id: int, host: str, port: int) -> BrokerProbe:
        known = self.brokers.get(node_id)
        if known is not None and (known.host, known.port) == (host, port):
            return known
        return BrokerProbe(node_id, host, port, self.security, self.timeout)

    def _follow(self, answered: Mapping[int, BrokerAnswer]) -> None:
        """The brokers to ask next look: those registered now."""
        metadata = _chosen(answered)
        before, self.brokers = self.brokers, {b: self._probe(b, m.host, m.port)
                                              for b, m in metadata.brokers.items()}
        for b, probe in before.items():
            if self.brokers.get(b) is not probe and b in answered:
                probe.close()  # no longer registered (or moved), and not in use

    def _raise_refusal(self, answers: Answers[Key]) -> None:
        """A broker that refused us (credentials, authorization): no use asking again."""
        for key, error in answers.errors.items():
            if key[0] != "metrics" and not isinstance(error, UNANSWERED):
                raise error

    def _nobody(self, answers: Answers[Key], probes: Mapping[int, BrokerProbe]) -> str:
        reasons = []
        for key in sorted(set(answers.errors) | answers.unanswered):
            probe = probes.get(key[1])
            if key[0] != "metrics" and probe is not None:
                reasons.append(f"{probe.host}:{probe.port}: {why(answers, key, self.timeout)}")
        return "no broker answered" + (f" ({'; '.join(reasons)})" if reasons else "")


def _scrape_call(url: str, timeout: float) -> Callable[[], Any]:
    return lambda: scrape(url, timeout)


def _chosen(answered: Mapping[int, BrokerAnswer]) -> ClusterMetadata:
    """The metadata the look shows: the controller's own answer when it gave one (it
    decides leaders and ISRs), else the lowest broker id's."""
    for b, answer in sorted(answered.items()):
        if answer.metadata.controller_id == b:
            return answer.metadata
    return answered[min(answered)].metadata


def build_look(answered: Mapping[int, BrokerAnswer], silent: Mapping[int, str],
               at: float) -> Look:
    """A look from the brokers that answered (`answered`) and why the others asked did
    not (`silent`: broker id -> reason)."""
    cluster = _chosen(answered)
    look = Look(at, cluster.cluster_id, cluster.controller_id)
    registered = set(cluster.brokers)
    expected = set(registered)
    for name, topic in sorted(cluster.topics.items()):
        look.topics[name] = {"partitions": len(topic.partitions), "internal": topic.is_internal}
        for p in topic.partitions.values():
            expected.update(p.replicas)
            if p.leader < 0 or p.leader not in registered:
                look.offline.setdefault(name, []).append(p.partition)
            elif len(p.isr) < len(p.replicas):
                look.under_replicated.setdefault(name, []).append(p.partition)
    look.offline_count = sum(map(len, look.offline.values()))
    look.under_replicated_count = sum(map(len, look.under_replicated.values()))
    for b in sorted(expected):
        meta = cluster.brokers.get(b)
        entry: dict[str, Any] = {
            "id": b, "host": meta.host if meta else None, "port": meta.port if meta else None,
            "up": b in registered and b not in silent, "controller": b == cluster.controller_id}
        if b in registered and b in silent:
            entry["error"] = silent[b]
        look.brokers.append(entry)
    ends = _end_offsets(cluster, answered)
    for (name, partition), end in ends.items():
        if name in look.topics:
            look.count(name, "in_msgs", partition, end)
    _add_groups(look, answered, ends)
    return look


def _add_groups(look: Look, answered: Mapping[int, BrokerAnswer],
                ends: Mapping[TopicPartition, int]) -> None:
    """The groups each broker coordinates: lag per partition (from the log end offsets
    known), committed offsets as the topics' consumed counters."""
    for b in sorted(answered):
        for group_id, g in answered[b].groups.items():
            if group_id in look.groups:
                continue  # (moving between coordinators: the first answer)
            entry = look.group(group_id)
            entry.update(state=g["state"], members=g["members"])
            if "error" in g:
                entry["error"] = g["error"]
            lags = look.lags[group_id]
            unknown = 0  # partitions whose leader did not answer: no end offset, no lag
            for tp, offset in g["committed"].items():
                if tp in ends:
                    lags[tp] = max(ends[tp] - offset, 0)
                else:
                    unknown += 1
                if tp[0] in look.topics:
                    look.count(tp[0], "consumed_msgs", (group_id, tp[1]), offset)
            entry["lag_unknown_partitions"] = unknown


def keep_unanswered_groups(look: Look, answered: Mapping[int, BrokerAnswer],
                           seen: Mapping[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """The groups seen in earlier looks whose coordinator did not answer this one (paused,
    cut off, still loading its groups) stay in `look`, their figures not known, rather than
    vanish; a group is forgotten once its coordinator lists its groups without it (deleted,
    or moved: then the new one lists it), or once every registered broker did and none
    listed it. Returns what is seen now: group -> (coordinator, partitions committed)."""
    cluster = _chosen(answered)
    listing = {b for b, a in answered.items() if a.groups_known}
    everyone = set(cluster.brokers) <= listing
    now: dict[str, tuple[int, int]] = {}
    for b in sorted(answered):
        for group_id, g in answered[b].groups.items():
            now.setdefault(group_id, (b, len(g["committed"])))
    for group_id, (coordinator, partitions) in sorted(seen.items()):
        if group_id in now or coordinator in listing or everyone:
            continue
        entry = look.group(group_id)
        entry.update(unanswered=True, lag_unknown_partitions=partitions,
                     error=f"its coordinator (broker {coordinator}) did not answer")
        now[group_id] = (coordinator, partitions)
    return now


def _end_offsets(cluster: ClusterMetadata, answered: Mapping[int, BrokerAnswer]
                 ) -> dict[TopicPartition, int]:
    """Each partition's log end offset as its leader (per the metadata shown) answered it,
    else as another broker that took itself for its leader did; a partition whose leader
    did not answer is left out (no rate for it in this look or the next)."""
    out: dict[TopicPartition, int] = {}
    for b, answer in sorted(answered.items()):
        for tp, end in answer.ends.items():
            if tp not in out or cluster.leader_for(*tp) == b:
                out[tp] = end
    return out
