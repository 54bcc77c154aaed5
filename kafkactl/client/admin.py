"""AdminClient: topics, partitions, configs and offsets through the protocol."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkactl.client.cluster import TopicMetadata
from kafkactl.client.consumer import SimpleConsumer
from kafkactl.client.errors import KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable
from kafkactl.client.fetcher import TopicPartition
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.security import ClientSecurity
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode, KafkaError, error_for

log = logging.getLogger(__name__)

TOPIC_RESOURCE = 2
# how long topic_offsets waits for a partition with no leader (or an unreachable one)
# before it reports that partition and returns the others
LEADER_GRACE_S = 2.0
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8  # a broker's loggers and their levels (KIP-412)
OP_SET, OP_DELETE = 0, 1
# ElectLeaders' election_type (KIP-460; version 1 and later)
PREFERRED_ELECTION, UNCLEAN_ELECTION = 0, 1


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool = False
    is_default: bool = False
    source: int = -1
    sensitive: bool = False
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)


# what a controller request lost with its connection may have done before the answer that
# came instead (the topic created, deleted, its partitions added)
_DONE_BY_A_LOST_REQUEST = frozenset({ErrorCode.TOPIC_ALREADY_EXISTS,
                                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     ErrorCode.INVALID_PARTITIONS})


def _only_topics(body: dict[str, Any], names: set[str]) -> None:
    """Keep in a CreateTopics/DeleteTopics/CreatePartitions body only the topics `names`."""
    if "topics" in body:
        body["topics"] = [t for t in body["topics"] if t.get("name") in names]
    if "topic_names" in body:
        body["topic_names"] = [n for n in body["topic_names"] if n in names]


def controller_connection(client: KafkaClient) -> Any:
    """A connection to the controller the metadata names (else to any broker)."""
    cluster = client.refresh_metadata([])
    if cluster.controller_id >= 0 and cluster.controller_id in cluster.brokers:
        return client.connection(cluster.controller_id)
    return client.any_connection()


def to_controller(client: KafkaClient, send: Callable[[Any], dict[str, Any]],
                  moved: Callable[[dict[str, Any]], bool], timeout_s: float, *,
                  resend_lost: bool = True, connect: Callable[[], Any] | None = None
                  ) -> tuple[dict[str, Any], bool]:
    """send(controller connection: `connect()`, else controller_connection) until its
    answer is not `moved` (NOT_CONTROLLER) and it reached a controller, backing off, until
    `timeout_s`; with `resend_lost`, a
    controller that cannot be reached (killed) is asked again once the metadata names
    another. (The answer, whether a connection was lost on the way.)"""
    deadline = time.monotonic() + timeout_s
    backoff = 0.05
    lost = False
    while True:
        try:
            resp = send(connect() if connect is not None else controller_connection(client))
        except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable):
            if not resend_lost or time.monotonic() + backoff >= deadline:
                raise
            lost = True
            node = client.cluster.controller_id
            if node >= 0:
                client.drop_connection(node)
                client.cluster.invalidate_node(node)
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)
            continue
        if not moved(resp) or time.monotonic() + backoff >= deadline:
            return resp, lost
        time.sleep(backoff)
        backoff = min(backoff * 2, 1.0)


class AdminClient:
    def __init__(self, bootstrap_servers: str | Iterable[str] | None = None, *,
                 client_id: str = "kafkactl-admin", request_timeout_ms: int = 30000,
                 security: ClientSecurity | None = None) -> None:
        self.client = KafkaClient(bootstrap_servers, client_id=client_id,
                                  request_timeout_ms=request_timeout_ms, security=security)
        self.timeout_ms = request_timeout_ms
        # what the broker may take (its requests' timeout_ms): less than the request
        # timeout, so that its REQUEST_TIMED_OUT answer arrives before this client gives up
        self.operation_timeout_ms = request_timeout_ms - min(5000, request_timeout_ms // 5)

    def _controller(self) -> Any:
        return controller_connection(self.client)

    def _controller_request(self, api_key: ApiKey, rows: str,
                            build: Callable[[Any], tuple[dict[str, Any], int | None]]
                            ) -> dict[str, Any]:
        """Send a controller-only request (CreateTopics, DeleteTopics, CreatePartitions),
        again to the new controller while every row answers NOT_CONTROLLER (a controller
        move, or a cluster still electing one) or the controller cannot be reached (killed:
        asked again once the metadata names another, as Java's admin client retries a
        disconnected call), until the request timeout. A row answered by a request sent
        again after a lost connection that says what the lost one may have done itself
        (the topic exists, is gone, has the partitions) says so in its message."""
        def moved(resp: dict[str, Any]) -> bool:
            codes = [r["error_code"] for r in resp.get(rows) or ()]
            return bool(codes) and all(c == ErrorCode.NOT_CONTROLLER for c in codes)

        deadline = time.monotonic() + self.timeout_ms / 1000
        again: set[str] | None = None  # the topics to ask for again (None: every one)
        answers: dict[str, dict[str, Any]] = {}

        def send(conn: Any) -> dict[str, Any]:
            body, version = build(conn)
            if again is not None:
                _only_topics(body, again)
            return conn.request(api_key, body, version=version)

        while True:
            resp, resent = self._to_controller(send, moved)
            for r in resp.get(rows) or ():
                if resent and r["error_code"] in _DONE_BY_A_LOST_REQUEST:
                    r["error_message"] = (
                        (r.get("error_message") or error_for(r["error_code"]).code.name)
                        + " (sent again after the connection to the controller was lost: "
                        "the lost request may have done it)")
                answers[r["name"]] = r
            # KIP-599: topics refused for the controller mutation quota are asked for
            # again after the throttle time, as Java's admin client (retryOnQuotaViolation)
            throttled = {r["name"] for r in resp.get(rows) or ()
                         if r["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED}
            wait = max(resp.get("throttle_time_ms") or 0, 50) / 1000
            if not throttled or time.monotonic() + wait >= deadline:
                resp[rows] = list(answers.values())
                return resp
            time.sleep(wait)
            again = throttled

    def _to_controller(self, send: Callable[[Any], dict[str, Any]],
                       moved: Callable[[dict[str, Any]], bool]) -> tuple[dict[str, Any], bool]:
        return to_controller(self.client, send, moved, self.timeout_ms / 1000,
                             connect=self._controller)

    @staticmethod
    def _check(code: int, message: str | None, what: str) -> None:
        if code:
            err = error_for(code)
            raise err(f"{what}: {err.code.name}" + (f": {message}" if message else ""))

    # -- topics ----------------------------------------------------------------------------

    def list_topics(self, include_internal: bool = True) -> dict[str, TopicMetadata]:
        cluster = self.client.refresh_metadata(None)
        return {n: t for n, t in sorted(cluster.topics.items())
                if include_internal or not t.is_internal}

    def describe_topics(self, topics: list[str] | None = None) -> dict[str, TopicMetadata]:
        cluster = self.client.refresh_metadata(topics)
        names = topics if topics is not None else sorted(cluster.topics)
        out = {}
        for n in names:
            t = cluster.topics.get(n)
            if t is None or t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)(f"topic {n!r} does not exist")
            out[n] = t
        return out

    def create_topics(self, topics: Mapping[str, tuple[int, int, Mapping[str, str]]], *,
                      validate_only: bool = False,
                      assignments: Mapping[str, Mapping[int, list[int]]] | None = None
                      ) -> dict[str, KafkaError | None]:
        """{name: (partitions, replication_factor, configs)} -> {name: error or None}.
        `assignments`: a topic's replicas by partition, given instead of its counts (which
        are then -1)."""
        chosen = assignments or {}
        body = {"topics": [
            {"name": n, "num_partitions": p, "replication_factor": rf,
             "assignments": [{"partition_index": i, "broker_ids": list(b)}
                             for i, b in sorted(chosen.get(n, {}).items())],
             "configs": [{"name": k, "value": v} for k, v in cfg.items()]}
            for n, (p, rf, cfg) in topics.items()],
            "timeout_ms": self.operation_timeout_ms, "validate_only": validate_only}
        resp = self._controller_request(ApiKey.CREATE_TOPICS, "topics", lambda _c: (body, None))
        return {t["name"]: (error_for(t["error_code"])(t.get("error_message") or
                            f"topic {t['name']!r}") if t["error_code"] else None)
                for t in resp.get("topics") or ()}

    def delete_topics(self, names: list[str]) -> dict[str, KafkaError | None]:
        def build(conn: Any) -> tuple[dict[str, Any], int | None]:
            v = conn.version_for(ApiKey.DELETE_TOPICS)
            body: dict[str, Any] = {"timeout_ms": self.operation_timeout_ms}
            if v >= 6:
                body["topics"] = [{"name": n} for n in names]
            else:
                body["topic_names"] = names
            return body, v

        resp = self._controller_request(ApiKey.DELETE_TOPICS, "responses", build)
        return {r["name"]: (error_for(r["error_code"])(r.get("error_message") or
                            f"topic {r['name']!r}") if r["error_code"] else None)
                for r in resp.get("responses") or ()}

    def create_partitions(self, counts: Mapping[str, int]) -> dict[str, KafkaError | None]:
        body = {"topics": [{"name": n, "count": c, "assignments": None}
                           for n, c in counts.items()],
                "timeout_ms": self.operation_timeout_ms, "validate_only": False}
        resp = self._controller_request(ApiKey.CREATE_PARTITIONS, "results",
                                        lambda _c: (body, None))
        return {r["name"]: (error_for(r["error_code"])(r.get("error_message") or r["name"])
                            if r["error_code"] else None) for r in resp.get("results") or ()}

    # -- configs ---------------------------------------------------------------------------

    def describe_configs(self, topic: str, keys: list[str] | None = None,
                         resource_type: int = TOPIC_RESOURCE) -> dict[str, ConfigEntry]:
        body = {"resources": [{"resource_type": resource_type, "resource_name": topic,
                               "configuration_keys": keys}],
                "include_synonyms": True, "include_documentation": False}
        resp = self._connection_for(topic, resource_type).request(ApiKey.DESCRIBE_CONFIGS,
                                                                  body)
        out: dict[str, ConfigEntry] = {}
        for r in resp.get("results") or ():
            self._check(r.get("error_code", 0), r.get("error_message"), f"configs of {topic}")
            for c in r.get("configs") or ():
                out[c["name"]] = ConfigEntry(
                    c["name"], c.get("value"), bool(c.get("read_only")),
                    bool(c.get("is_default")) or c.get("config_source") == 5,
                    c.get("config_source", -1), bool(c.get("is_sensitive")),
                    [(s["name"], s.get("value"), s.get("source", -1))
                     for s in c.get("synonyms") or ()])
        return out

    def alter_configs(self, topic: str, set_configs: Mapping[str, str],
                      delete: Iterable[str] = (), resource_type: int = TOPIC_RESOURCE) -> None:
        configs = [{"name": k, "config_operation": OP_SET, "value": v}
                   for k, v in set_configs.items()]
        configs += [{"name": k, "config_operation": OP_DELETE, "value": None} for k in delete]
        body = {"resources": [{"resource_type": resource_type, "resource_name": topic,
                               "configs": configs}], "validate_only": False}
        conn = self._connection_for(topic, resource_type) \
            if resource_type in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE) \
            else self._controller()
        resp = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
        for r in resp.get("responses") or ():
            self._check(r.get("error_code", 0), r.get("error_message"), f"alter {topic}")

    def _connection_for(self, name: str, resource_type: int) -> Any:
        """One broker's own configs and loggers are that broker's to describe and change
        (as with Kafka's admin client); anything else any broker answers."""
        if resource_type in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE) and name.isdigit():
            self.client.refresh_metadata([])
            return self.client.connection(int(name))
        return self.client.any_connection()

    # -- leaders and replicas ---------------------------------------------------------------

    def _top_level_to_controller(self, api_key: ApiKey, body: dict[str, Any],
                                 row_codes: Callable[[dict[str, Any]], Iterable[int]] | None
                                 = None) -> dict[str, Any]:
        """A controller-only request whose answer is NOT_CONTROLLER until it reaches the
        controller (retried as the controller moves, until the request timeout): its
        top-level error, or one of its `row_codes` (ElectLeaders says it per partition, as
        Java's admin client looks for it in the answer's error counts). Its requests
        (ElectLeaders, Alter/ListPartitionReassignments) may be sent again, so a controller
        that cannot be reached (killed) is also retried, once the metadata names another."""
        def moved(resp: dict[str, Any]) -> bool:
            return resp.get("error_code") == ErrorCode.NOT_CONTROLLER or (
                row_codes is not None and ErrorCode.NOT_CONTROLLER in row_codes(resp))

        resp, _lost = self._to_controller(lambda conn: conn.request(api_key, body), moved)
        self._check(resp.get("error_code", 0), resp.get("error_message"), api_key.name.lower())
        return resp

    def elect_preferred_leaders(self, partitions: Iterable[TopicPartition] | None = None
                                ) -> dict[TopicPartition, KafkaError | None]:
        """Move leadership back to each partition's preferred (first) replica; None for
        every partition (all of them when `partitions` is None) that moved."""
        return self.elect_leaders(PREFERRED_ELECTION, partitions)

    def elect_unclean_leaders(self, partitions: Iterable[TopicPartition] | None = None
                              ) -> dict[TopicPartition, KafkaError | None]:
        """KIP-460's unclean election: each partition without a live leader gets a live
        replica, in sync if one is, else out of sync (its missing records are lost); None
        for every partition (all of them when `partitions` is None) that got a leader."""
        return self.elect_leaders(UNCLEAN_ELECTION, partitions)

    def elect_leaders(self, election_type: int, partitions: Iterable[TopicPartition] | None
                      ) -> dict[TopicPartition, KafkaError | None]:
        """ElectLeaders of `election_type` (PREFERRED_ELECTION, UNCLEAN_ELECTION)."""
        if election_type != PREFERRED_ELECTION and \
                self.client.any_connection().version_for(ApiKey.ELECT_LEADERS) < 1:
            # version 0 has no election type: it would hold a preferred election instead
            # (any broker tells: the controller may be the one that is down)
            raise error_for(ErrorCode.UNSUPPORTED_VERSION)(
                "the brokers speak ElectLeaders version 0, which has no election type: "
                "unclean elections need Kafka 2.4 or later")
        wanted: list[dict[str, Any]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            wanted = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
        resp = self._top_level_to_controller(ApiKey.ELECT_LEADERS, {
            "election_type": election_type, "topic_partitions": wanted,
            "timeout_ms": self.operation_timeout_ms}, row_codes=lambda r: [
                p["error_code"] for t in r.get("replica_election_results") or ()
                for p in t["partition_result"]])
        return {(r["topic"], p["partition_id"]):
                (error_for(p["error_code"])(p.get("error_message") or f"{r['topic']}-"
                                            f"{p['partition_id']}")
                 if p["error_code"] else None)
                for r in resp.get("replica_election_results") or ()
                for p in r["partition_result"]}

    def alter_partition_reassignments(self, targets: Mapping[TopicPartition, list[int] | None]
                                      ) -> dict[TopicPartition, KafkaError | None]:
        """Start moving partitions to the `targets` replicas (None cancels a move)."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), replicas in targets.items():
            by_topic.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
        resp = self._top_level_to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
            "timeout_ms": self.operation_timeout_ms,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        return {(r["name"], p["partition_index"]):
                (error_for(p["error_code"])(p.get("error_message") or r["name"])
                 if p["error_code"] else None)
                for r in resp.get("responses") or () for p in r["partitions"]}

    def list_partition_reassignments(self) -> dict[TopicPartition, tuple[list[int], list[int],
                                                                         list[int]]]:
        """Moves in progress: partition -> (replicas, adding, removing)."""
        resp = self._top_level_to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, {
            "timeout_ms": self.operation_timeout_ms, "topics": None})
        return {(t["name"], p["partition_index"]):
                (list(p["replicas"]), list(p["adding_replicas"]), list(p["removing_replicas"]))
                for t in resp.get("topics") or () for p in t["partitions"]}

    # -- offsets ---------------------------------------------------------------------------

    def list_offsets(self, requests: Mapping[TopicPartition, int]
                     ) -> dict[TopicPartition, tuple[int, int]]:
        return SimpleConsumer(client=self.client).list_offsets(requests)

    def topic_offsets(self, topics: list[str] | None, partitions: Iterable[int] | None,
                      timestamp: int, *, include_internal: bool = True
                      ) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets for every partition of `topics` (all topics when None; only
        `partitions` when given): (offset, timestamp) at `timestamp`, -2 earliest, -1
        latest, -3 the record with the largest timestamp; offset -1 when no record is that
        new (kafka-get-offsets). A partition with no leader (or whose leader cannot be
        reached) for LEADER_GRACE_S is left out, with a warning on the log naming it; the
        others are answered all the same."""
        found = self.describe_topics(topics) if topics else self.list_topics(include_internal)
        wanted = None if partitions is None else set(partitions)
        tps = sorted((name, p) for name, t in found.items() for p in t.partitions
                     if wanted is None or p in wanted)
        if wanted is not None:
            for name, t in found.items():
                missing = sorted(wanted - set(t.partitions))
                if missing and topics:
                    raise error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)(
                        f"topic {name!r} has no partition {missing[0]} (it has "
                        f"{len(t.partitions)})")
        if not tps:
            return {}
        offsets, why = SimpleConsumer(client=self.client).try_list_offsets(
            dict.fromkeys(tps, timestamp), min(self.client.request_timeout, LEADER_GRACE_S))
        for (name, part), reason in sorted(why.items()):
            # (kafka-get-offsets skips such a partition with a line on stderr too)
            log.warning("%s:%d has no offset: %s", name, part, reason)
        return dict(sorted(offsets.items()))

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
