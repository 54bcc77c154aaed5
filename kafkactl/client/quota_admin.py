"""Client quotas through the Kafka protocol: DescribeClientQuotas and AlterClientQuotas.

An entity is a mapping {"user": name, "client-id": name}, a None name meaning the default
(`<default>`). `alter` goes to one broker: a standalone broker keeps the quotas in its data
dir, a broker of a ZooKeeper cluster writes them to ZooKeeper, whence every broker (also
one that was down meanwhile) applies them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkactl.client.errors import ClientError
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


@dataclass(frozen=True)
class QuotaEntry:
    entity: dict[str, str | None]
    values: dict[str, float]


class QuotaAdmin:
    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    def describe(self, filters: Mapping[str, str | None | type[Any]] | None = None,
                 strict: bool = False) -> list[QuotaEntry]:
        """The quotas whose entity matches every filter: entity type -> a name, None (the
        default) or `any` (any name)."""
        components = []
        for etype, match in (filters or {}).items():
            if match is any:
                components.append({"entity_type": etype, "match_type": MATCH_ANY,
                                   "match": None})
            elif match is None:
                components.append({"entity_type": etype, "match_type": MATCH_DEFAULT,
                                   "match": None})
            else:
                components.append({"entity_type": etype, "match_type": MATCH_EXACT,
                                   "match": match})
        resp = self.client.any_connection().request(
            ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": components, "strict": strict})
        _check(resp.get("error_code", 0), resp.get("error_message"), "describe quotas")
        return [QuotaEntry({e["entity_type"]: e.get("entity_name") for e in entry["entity"]},
                           {v["key"]: v["value"] for v in entry["values"]})
                for entry in resp.get("entries") or ()]

    def alter(self, entity: Mapping[str, str | None], set_values: Mapping[str, float],
              remove: Iterable[str] = (), validate_only: bool = False) -> None:
        """Set and remove quota keys of `entity`."""
        ops = [{"key": k, "value": float(v), "remove": False} for k, v in set_values.items()]
        ops += [{"key": k, "value": 0.0, "remove": True} for k in remove]
        body = {"entries": [{"entity": [{"entity_type": t, "entity_name": n}
                                        for t, n in entity.items()], "ops": ops}],
                "validate_only": validate_only}
        resp = self.client.any_connection().request(ApiKey.ALTER_CLIENT_QUOTAS, body)
        for entry in resp.get("entries") or ():
            _check(entry.get("error_code", 0), entry.get("error_message"), "alter quotas")


def _check(code: int, message: str | None, what: str) -> None:
    if code:
        raise ClientError(f"{what}: {ErrorCode(code).name}"
                          + (f": {message}" if message else ""))
