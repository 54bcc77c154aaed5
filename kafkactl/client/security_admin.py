"""Admin calls for security, over the protocol: ACLs (Describe/Create/DeleteAcls) and SCRAM
users (Describe/AlterUserScramCredentials, the salted password computed here, so the
password never leaves the client; AlterUserScramCredentials goes to the controller)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from kafkactl.client.errors import ClientError
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.protocol import scram
from kafkactl.protocol.api_keys import ApiKey


class SecurityAdminError(ClientError):
    """The broker refused a security admin call; the message has its error."""


@dataclass(frozen=True)
class AclEntry:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


def _check(code: int, message: str | None, what: str) -> None:
    if code:
        from kafkactl.protocol.errors import ErrorCode

        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        raise SecurityAdminError(f"{what}: {name}" + (f" ({message})" if message else ""))


def _request(client: KafkaClient, api_key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    return client.any_connection().request(api_key, body)


def _controller_request(client: KafkaClient, api_key: ApiKey,
                        body: dict[str, Any]) -> dict[str, Any]:
    """Send to the controller the Metadata names (only it alters SCRAM credentials in a
    ZooKeeper cluster, as in Kafka's), again while every result says NOT_CONTROLLER (the
    controller moved, or none is elected yet), until the request timeout: as Java's admin
    client does with its ControllerNodeProvider. A lost connection is not resent (a
    deletion sent again would answer that the user does not exist)."""
    from kafkactl.client.admin import to_controller
    from kafkactl.protocol.errors import ErrorCode

    def moved(r: dict[str, Any]) -> bool:
        codes = [res["error_code"] for res in r["results"]]
        return bool(codes) and all(c == ErrorCode.NOT_CONTROLLER for c in codes)

    resp, _lost = to_controller(client, lambda conn: conn.request(api_key, body), moved,
                                client.request_timeout, resend_lost=False)
    return resp


def describe_acls(client: KafkaClient, flt: AclEntry) -> list[AclEntry]:
    r = _request(client, ApiKey.DESCRIBE_ACLS, {
        "resource_type_filter": flt.resource_type, "resource_name_filter": flt.resource_name,
        "pattern_type_filter": flt.pattern_type, "principal_filter": flt.principal,
        "host_filter": flt.host, "operation": flt.operation,
        "permission_type": flt.permission_type})
    _check(r["error_code"], r["error_message"], "DescribeAcls")
    return [AclEntry(res["resource_type"], res["resource_name"], res["pattern_type"],
                     a["principal"], a["host"], a["operation"], a["permission_type"])
            for res in r["resources"] for a in res["acls"]]


def create_acls(client: KafkaClient, entries: list[AclEntry]) -> None:
    r = _request(client, ApiKey.CREATE_ACLS, {"creations": [
        {"resource_type": e.resource_type, "resource_name": e.resource_name,
         "resource_pattern_type": e.pattern_type, "principal": e.principal, "host": e.host,
         "operation": e.operation, "permission_type": e.permission_type} for e in entries]})
    for res in r["results"]:
        _check(res["error_code"], res["error_message"], "CreateAcls")


def delete_acls(client: KafkaClient, filters: list[AclEntry]) -> list[AclEntry]:
    r = _request(client, ApiKey.DELETE_ACLS, {"filters": [
        {"resource_type_filter": f.resource_type, "resource_name_filter": f.resource_name,
         "pattern_type_filter": f.pattern_type, "principal_filter": f.principal,
         "host_filter": f.host, "operation": f.operation,
         "permission_type": f.permission_type} for f in filters]})
    removed: list[AclEntry] = []
    for res in r["filter_results"]:
        _check(res["error_code"], res["error_message"], "DeleteAcls")
        removed += [AclEntry(m["resource_type"], m["resource_name"], m["pattern_type"],
                             m["principal"], m["host"], m["operation"], m["permission_type"])
                    for m in res["matching_acls"]]
    return removed


def describe_users(client: KafkaClient) -> dict[str, list[tuple[str, int]]]:
    r = _request(client, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None})
    _check(r["error_code"], r["error_message"], "DescribeUserScramCredentials")
    return {u["user"]: [(scram.BY_TYPE[c["mechanism"]].name, c["iterations"])
                        for c in u["credential_infos"] if c["mechanism"] in scram.BY_TYPE]
            for u in r["results"]}


def alter_user(client: KafkaClient, user: str, *, password: str | None,
               mechanisms: list[str], iterations: int = 4096) -> None:
    """Upsert (password given) or delete the user's credentials for `mechanisms`."""
    body: dict[str, Any] = {"deletions": [], "upsertions": []}
    for name in mechanisms:
        mech = scram.MECHANISMS[name]
        if password is None:
            body["deletions"].append({"name": user, "mechanism": mech.type_code})
            continue
        salt = secrets.token_bytes(32)
        body["upsertions"].append({
            "name": user, "mechanism": mech.type_code, "iterations": iterations,
            "salt": salt, "salted_password": mech.salted_password(password, salt, iterations)})
    r = _controller_request(client, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body)
    for res in r["results"]:
        _check(res["error_code"], res["error_message"], f"AlterUserScramCredentials {user}")
