"""AdminClient: topics, partitions, configs and offsets through the protocol."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkactl.client.cluster import TopicMetadata
from kafkactl.client.consumer import SimpleConsumer
from kafkactl.client.fetcher import TopicPartition
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.security import ClientSecurity
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode, KafkaError, error_for

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
OP_SET, OP_DELETE = 0, 1


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool = False
    is_default: bool = False
    source: int = -1
    sensitive: bool = False
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)


class AdminClient:
    def __init__(self, bootstrap_servers: str | Iterable[str] | None = None, *,
                 client_id: str = "kafkactl-admin", request_timeout_ms: int = 30000,
                 security: ClientSecurity | None = None) -> None:
        self.client = KafkaClient(bootstrap_servers, client_id=client_id,
                                  request_timeout_ms=request_timeout_ms, security=security)
        self.timeout_ms = request_timeout_ms

    def _controller(self) -> Any:
        cluster = self.client.refresh_metadata([])
        if cluster.controller_id >= 0 and cluster.controller_id in cluster.brokers:
            return self.client.connection(cluster.controller_id)
        return self.client.any_connection()

    @staticmethod
    def _check(code: int, message: str | None, what: str) -> None:
        if code:
            err = error_for(code)
            raise err(f"{what}: {message or err.code.name}")

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
                      validate_only: bool = False) -> dict[str, KafkaError | None]:
        """{name: (partitions, replication_factor, configs)} -> {name: error or None}."""
        body = {"topics": [
            {"name": n, "num_partitions": p, "replication_factor": rf, "assignments": [],
             "configs": [{"name": k, "value": v} for k, v in cfg.items()]}
            for n, (p, rf, cfg) in topics.items()],
            "timeout_ms": self.timeout_ms, "validate_only": validate_only}
        resp = self._controller().request(ApiKey.CREATE_TOPICS, body)
        return {t["name"]: (error_for(t["error_code"])(t.get("error_message") or
                            f"topic {t['name']!r}") if t["error_code"] else None)
                for t in resp.get("topics") or ()}

    def delete_topics(self, names: list[str]) -> dict[str, KafkaError | None]:
        conn = self._controller()
        v = conn.version_for(ApiKey.DELETE_TOPICS)
        body: dict[str, Any] = {"timeout_ms": self.timeout_ms}
        if v >= 6:
            body["topics"] = [{"name": n} for n in names]
        else:
            body["topic_names"] = names
        resp = conn.request(ApiKey.DELETE_TOPICS, body, version=v)
        return {r["name"]: (error_for(r["error_code"])(r.get("error_message") or
                            f"topic {r['name']!r}") if r["error_code"] else None)
                for r in resp.get("responses") or ()}

    def create_partitions(self, counts: Mapping[str, int]) -> dict[str, KafkaError | None]:
        body = {"topics": [{"name": n, "count": c, "assignments": None}
                           for n, c in counts.items()],
                "timeout_ms": self.timeout_ms, "validate_only": False}
        resp = self._controller().request(ApiKey.CREATE_PARTITIONS, body)
        return {r["name"]: (error_for(r["error_code"])(r.get("error_message") or r["name"])
                            if r["error_code"] else None) for r in resp.get("results") or ()}

    # -- configs ---------------------------------------------------------------------------

    def describe_configs(self, topic: str, keys: list[str] | None = None,
                         resource_type: int = TOPIC_RESOURCE) -> dict[str, ConfigEntry]:
        body = {"resources": [{"resource_type": resource_type, "resource_name": topic,
                               "configuration_keys": keys}],
                "include_synonyms": True, "include_documentation": False}
        resp = self.client.any_connection().request(ApiKey.DESCRIBE_CONFIGS, body)
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
        resp = self._controller().request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
        for r in resp.get("responses") or ():
            self._check(r.get("error_code", 0), r.get("error_message"), f"alter {topic}")

    # -- offsets ---------------------------------------------------------------------------

    def list_offsets(self, requests: Mapping[TopicPartition, int]
                     ) -> dict[TopicPartition, tuple[int, int]]:
        return SimpleConsumer(client=self.client).list_offsets(requests)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
