"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554.

The client sends the salted password (Hi(password, salt, iterations)); the broker keeps only
the salt, StoredKey, ServerKey and iterations. Describe needs Describe on the cluster, Alter
needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise). Per-user errors as
Kafka: RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNSUPPORTED_SASL_MECHANISM,
UNACCEPTABLE_CREDENTIAL. In a ZooKeeper cluster only the controller alters credentials:
any other broker answers NOT_CONTROLLER for every user, as Kafka's ZooKeeper mode (clients
send it to the controller named by Metadata); a standalone broker is its own controller.
"""

from __future__ import annotations

from typing import Any

from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security import store_writes
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import authorize_cluster
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol import scram
from kafkactl.protocol.errors import ErrorCode

# Kafka's message of ClusterAuthorizationException, which its error responses carry: a null
# message with an error made librdkafka's DescribeUserScramCredentials abort the process.
CLUSTER_DENIED = "Cluster authorization failed."
# the message of Kafka's NotControllerException (Errors.NOT_CONTROLLER's default)
NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."


def handle_describe_user_scram_credentials(services: BrokerServices, ctx: RequestContext,
                                           request: dict[str, Any]) -> dict[str, Any]:
    response: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0,
                                "error_message": None, "results": []}
    if not authorize_cluster(services, ctx, AclOperation.DESCRIBE):
        # Kafka's DescribeUserScramCredentialsRequest.getErrorResponse: the error, and one
        # result per requested user carrying it (their user field left at its default,
        # ""); none when every user was asked for (null or empty list)
        response.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=CLUSTER_DENIED)
        response["results"] = [
            {"user": "", "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
             "error_message": CLUSTER_DENIED, "credential_infos": []}
            for _ in request.get("users") or ()]
        return response
    store = services.credentials
    users = store.users() if store is not None else {}
    wanted = request["users"]
    names = sorted(users) if not wanted else [u["name"] for u in wanted]
    seen: set[str] = set()
    for name in names:
        result: dict[str, Any] = {"user": name, "error_code": 0, "error_message": None,
                                  "credential_infos": []}
        if name in seen:
            result.update(error_code=ErrorCode.DUPLICATE_RESOURCE,
                          error_message=f"Cannot describe SCRAM credentials for the same "
                                        f"user twice in a single request: {name}")
        elif name not in users:
            result.update(error_code=ErrorCode.RESOURCE_NOT_FOUND,
                          error_message=f"Attempt to describe a user credential that does "
                                        f"not exist: {name}")
        else:
            result["credential_infos"] = [
                {"mechanism": scram.MECHANISMS[m].type_code, "iterations": c.iterations}
                for m, c in sorted(users[name].items())]
        seen.add(name)
        response["results"].append(result)
    return response


def _check(change: dict[str, Any], upsert: bool, users: dict[str, dict[str, Any]],
           counts: dict[tuple[str, int], int]) -> tuple[int, str | None]:
    name = change["name"]
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if counts[(name, change["mechanism"])] > 1:
        return ErrorCode.DUPLICATE_RESOURCE, (
            f"A user credential cannot be altered twice in the same request: {name}")
    mechanism = scram.BY_TYPE.get(change["mechanism"])
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if not upsert:
        if mechanism.name not in users.get(name, {}):
            return ErrorCode.RESOURCE_NOT_FOUND, (
                f"Attempt to delete a user credential that does not exist: {name}")
        return 0, None
    iterations = change["iterations"]
    if not mechanism.min_iterations <= iterations <= mechanism.max_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, (
            f"Iterations must be between {mechanism.min_iterations} and "
            f"{mechanism.max_iterations}: {iterations}")
    if not change["salt"] or len(change["salted_password"]) == 0:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must be set"
    return 0, None


async def handle_alter_user_scram_credentials(services: BrokerServices,
                                              ctx: RequestContext,
                                              request: dict[str, Any]) -> dict[str, Any]:
    deletions, upsertions = request["deletions"], request["upsertions"]
    store = services.credentials
    names = [c["name"] for c in (*deletions, *upsertions)]
    cluster = services.cluster
    if cluster is not None and not cluster.controller.active:
        # Kafka's ZooKeeper mode: only the controller alters credentials (before any
        # authorization); its getErrorResponse names each user once, sorted
        return {"throttle_time_ms": 0, "results": [
            {"user": n, "error_code": ErrorCode.NOT_CONTROLLER,
             "error_message": NOT_CONTROLLER_MESSAGE} for n in sorted(set(names))]}
    if not authorize_cluster(services, ctx, AclOperation.ALTER) or store is None:
        return {"throttle_time_ms": 0, "results": [
            {"user": n, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
             "error_message": CLUSTER_DENIED} for n in dict.fromkeys(names)]}
    users = store.users()
    pairs = [(c["name"], c["mechanism"]) for c in (*deletions, *upsertions)]
    counts = {p: pairs.count(p) for p in pairs}
    errors: dict[str, tuple[int, str | None]] = {}
    upserts: dict[tuple[str, str], scram.ScramCredential] = {}
    removals: set[tuple[str, str]] = set()
    for upsert, changes in ((False, deletions), (True, upsertions)):
        for change in changes:
            code, message = _check(change, upsert, users, counts)
            if code:
                errors.setdefault(change["name"], (code, message))
                continue
            mechanism = scram.BY_TYPE[change["mechanism"]]
            key = (change["name"], mechanism.name)
            if upsert:
                upserts[key] = scram.credential_from_salted(
                    mechanism, bytes(change["salted_password"]), bytes(change["salt"]),
                    change["iterations"])
            else:
                removals.add(key)
    upserts = {k: v for k, v in upserts.items() if k[0] not in errors}
    removals = {k for k in removals if k[0] not in errors}
    if upserts or removals:
        await store_writes.write(store.alter, upserts, removals)
    return {"throttle_time_ms": 0, "results": [
        {"user": n, "error_code": errors.get(n, (0, None))[0],
         "error_message": errors.get(n, (0, None))[1]} for n in dict.fromkeys(names)]}
