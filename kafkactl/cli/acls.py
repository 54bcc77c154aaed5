"""`kafkactl acls add|list|remove` (kafka-acls, through the protocol).

kafka-acls' flags: `--allow-principal` / `--deny-principal` (User:NAME, repeatable),
`--allow-host` / `--deny-host` (repeatable, default *, each for its kind of principal),
`--operation` (Read, Write, Create, Delete, Alter, Describe, ClusterAction,
DescribeConfigs, AlterConfigs, IdempotentWrite, All; repeatable), the resource `--topic`,
`--group`, `--transactional-id` or `--cluster` (an operation the resource type lacks is
refused, as kafka-acls), and `--resource-pattern-type` (literal,
prefixed; for list and remove also any, match).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    client_security,
    command_config_option,
    fail,
    property_option,
)

acls_app = typer.Typer(help="Add, list and remove ACLs (kafka-acls).", no_args_is_help=True)

RESOURCE_TYPES = {"any": 1, "topic": 2, "group": 3, "cluster": 4, "transactional-id": 5}
PATTERN_TYPES = {"any": 1, "match": 2, "literal": 3, "prefixed": 4}
OPERATIONS = {"any": 1, "all": 2, "read": 3, "write": 4, "create": 5, "delete": 6,
              "alter": 7, "describe": 8, "clusteraction": 9, "describeconfigs": 10,
              "alterconfigs": 11, "idempotentwrite": 12}
PERMISSIONS = {1: "ANY", 2: "Deny", 3: "Allow"}
OPERATION_NAMES = {3: "Read", 4: "Write", 5: "Create", 6: "Delete", 7: "Alter", 8: "Describe",
                   9: "ClusterAction", 10: "DescribeConfigs", 11: "AlterConfigs",
                   12: "IdempotentWrite", 2: "All"}
RESOURCE_NAMES = {2: "Topic", 3: "Group", 4: "Cluster", 5: "TransactionalId"}
PATTERN_NAMES = {3: "LITERAL", 4: "PREFIXED"}
# the operations an ACL of each resource type can grant (Kafka's AclEntry.supportedOperations,
# All besides): kafka-acls refuses others
VALID_OPERATIONS = {2: (3, 4, 5, 8, 6, 7, 10, 11), 3: (3, 8, 6),
                    4: (5, 9, 10, 11, 12, 7, 8), 5: (8, 4)}


def _resources(topic: list[str], group: list[str], transactional_id: list[str],
               cluster: bool) -> list[tuple[int, str]]:
    out = [(2, t) for t in topic] + [(3, g) for g in group] + \
        [(5, t) for t in transactional_id]
    if cluster:
        out.append((4, "kafka-cluster"))
    return out


def _operations(operation: list[str], default: str) -> list[int]:
    ops = []
    for op in operation or [default]:
        code = OPERATIONS.get(op.replace("-", "").replace("_", "").lower())
        if code is None:
            raise fail(f"--operation {op}: unknown operation (use "
                       f"{', '.join(OPERATION_NAMES.values())})", 2)
        ops.append(code)
    return ops


def _check_operations(resources: list[tuple[int, str]], ops: list[int]) -> None:
    """Refuse an operation a resource type has no use for (as kafka-acls: an ACL granting
    Write on a group would be stored and never mean anything)."""
    for rt in sorted({rt for rt, _name in resources}):
        valid = VALID_OPERATIONS[rt]
        wrong = [op for op in ops if op != 2 and op not in valid]
        if wrong:
            names = ", ".join(OPERATION_NAMES[op] for op in (*valid, 2))
            raise fail(f"--operation {OPERATION_NAMES[wrong[0]]}: ResourceType "
                       f"{RESOURCE_NAMES[rt]} only supports operations {names}", 2)


def _pattern(value: str, allowed: tuple[str, ...]) -> int:
    if value.lower() not in allowed:
        raise fail(f"--resource-pattern-type {value}: use {', '.join(allowed)}", 2)
    return PATTERN_TYPES[value.lower()]


def _client(bootstrap: str | None, prop: list[str], command_config: Path | None) -> Any:
    from kafkactl.client.kafka_client import KafkaClient

    return KafkaClient(bootstrap, client_id="kafkactl-acls",
                       security=client_security(prop, command_config))


def _run(fn: Any) -> Any:
    from kafkactl.client.errors import ClientError

    try:
        return fn()
    except ClientError as e:
        raise fail(str(e)) from None


# ---- the options add, list and remove share (kafka-acls' flags) ----------------------------
def _allow_principal_option() -> Any:
    return typer.Option([], "--allow-principal",
                        help="Principal to allow, e.g. User:alice (repeatable).")


def _deny_principal_option() -> Any:
    return typer.Option([], "--deny-principal", help="Principal to deny (repeatable).")


def _operation_option() -> Any:
    return typer.Option([], "--operation", help=(
        "Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
        "DescribeConfigs, AlterConfigs, IdempotentWrite or All (repeatable)."))


def _topic_option() -> Any:
    return typer.Option([], "--topic", help="Topic resource (repeatable; * = every topic).")


def _group_option() -> Any:
    return typer.Option([], "--group", help="Consumer group resource (repeatable).")


def _transactional_id_option() -> Any:
    return typer.Option([], "--transactional-id",
                        help="Transactional id resource (repeatable).")


def _cluster_option() -> Any:
    return typer.Option(False, "--cluster", help="The cluster resource.")


def _allow_host_option() -> Any:
    return typer.Option([], "--allow-host", help=(
        "Host the --allow-principal ACLs apply to (repeatable; default * = any host)."))


def _deny_host_option() -> Any:
    return typer.Option([], "--deny-host", help=(
        "Host the --deny-principal ACLs apply to (repeatable; default * = any host)."))


def _hosts_need_principals(allow_principal: list[str], allow_host: list[str],
                           deny_principal: list[str], deny_host: list[str]) -> None:
    """kafka-acls ties --allow-host to --allow-principal and --deny-host to
    --deny-principal: a host alone names no ACL."""
    for hosts, principals, flag in ((allow_host, allow_principal, "allow"),
                                    (deny_host, deny_principal, "deny")):
        if hosts and not principals:
            raise fail(f"--{flag}-host needs --{flag}-principal (the host of which "
                       f"principal's ACLs?)", 2)


def _pattern_type_option(default: str) -> Any:
    return typer.Option(default, "--resource-pattern-type",
                        help="literal, prefixed (add/remove); any, match too (list).")


@acls_app.command("add")
def add(
    allow_principal: list[str] = _allow_principal_option(),
    deny_principal: list[str] = _deny_principal_option(),
    allow_host: list[str] = _allow_host_option(),
    deny_host: list[str] = _deny_host_option(),
    operation: list[str] = _operation_option(),
    topic: list[str] = _topic_option(),
    group: list[str] = _group_option(),
    transactional_id: list[str] = _transactional_id_option(),
    cluster: bool = _cluster_option(),
    resource_pattern_type: str = _pattern_type_option("literal"),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Add ACLs (every principal x operation x resource)."""
    from kafkactl.client.security_admin import AclEntry, create_acls

    resources = _resources(topic, group, transactional_id, cluster)
    if not resources or not (allow_principal or deny_principal):
        raise fail("give a resource (--topic, --group, --transactional-id, --cluster) and "
                   "--allow-principal or --deny-principal", 2)
    _hosts_need_principals(allow_principal, allow_host, deny_principal, deny_host)
    ptype = _pattern(resource_pattern_type, ("literal", "prefixed"))
    ops = _operations(operation, "all")
    _check_operations(resources, ops)
    entries = [AclEntry(rt, name, ptype, p, host, op, perm)
               for perm, principals, hosts in ((3, allow_principal, allow_host),
                                               (2, deny_principal, deny_host))
               for p in principals for host in hosts or ["*"]
               for rt, name in resources for op in ops]
    client = _client(bootstrap, prop, command_config)
    try:
        _run(lambda: create_acls(client, entries))
    finally:
        client.close()
    typer.echo(f"Added {len(entries)} ACL(s).")


def _filters(principal: list[str], topic: list[str], group: list[str],
             transactional_id: list[str], cluster: bool, pattern: str,
             operation: list[str]) -> list[Any]:
    from kafkactl.client.security_admin import AclEntry

    ptype = _pattern(pattern, ("any", "match", "literal", "prefixed"))
    resources: list[tuple[int, str | None]] = list(
        _resources(topic, group, transactional_id, cluster)) or [(1, None)]
    ops = _operations(operation, "any")
    principals: list[str | None] = list(principal) or [None]
    return [AclEntry(rt, name, ptype, p, None, op, 1)  # type: ignore[arg-type]
            for rt, name in resources for p in principals for op in ops]


def _show(entries: list[Any]) -> None:
    for e in entries:
        typer.echo(f"{RESOURCE_NAMES.get(e.resource_type, e.resource_type)}:"
                   f"{PATTERN_NAMES.get(e.pattern_type, e.pattern_type)}:{e.resource_name}\t"
                   f"principal={e.principal}, host={e.host}, "
                   f"operation={OPERATION_NAMES.get(e.operation, e.operation)}, "
                   f"permissionType={PERMISSIONS.get(e.permission_type, e.permission_type)}")


@acls_app.command("list")
def list_acls(
    principal: list[str] = typer.Option([], "--principal",
        help="Only ACLs of this principal (repeatable)."),
    topic: list[str] = _topic_option(),
    group: list[str] = _group_option(),
    transactional_id: list[str] = _transactional_id_option(),
    cluster: bool = _cluster_option(),
    resource_pattern_type: str = _pattern_type_option("any"),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """List ACLs (all, or those matching the filters)."""
    from kafkactl.client.security_admin import describe_acls

    client = _client(bootstrap, prop, command_config)
    try:
        for flt in _filters(principal, topic, group, transactional_id, cluster,
                            resource_pattern_type, []):
            _show(_run(lambda flt=flt: describe_acls(client, flt)))
    finally:
        client.close()


@acls_app.command("remove")
def remove(
    allow_principal: list[str] = _allow_principal_option(),
    deny_principal: list[str] = _deny_principal_option(),
    allow_host: list[str] = _allow_host_option(),
    deny_host: list[str] = _deny_host_option(),
    principal: list[str] = typer.Option(
        [], "--principal",
        help="Every ACL of this principal: allow or deny, any host and operation unless "
             "--operation (repeatable); of every resource when none is given."),
    operation: list[str] = _operation_option(),
    topic: list[str] = _topic_option(),
    group: list[str] = _group_option(),
    transactional_id: list[str] = _transactional_id_option(),
    cluster: bool = _cluster_option(),
    resource_pattern_type: str | None = typer.Option(
        None, "--resource-pattern-type",
        help="literal (the default with a resource), prefixed, any (the default with "
             "--principal alone), match."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
) -> None:
    """Remove ACLs of a resource, as kafka-acls --remove: with
    --allow-principal / --deny-principal exactly the ACLs `acls add` makes from the same
    flags (host * and operation All unless --allow-host / --deny-host / --operation);
    with --principal every ACL of that principal (of every resource, any pattern type,
    when no resource is given); with neither every ACL of the resource (of the
    --operation given)."""
    from dataclasses import replace

    from kafkactl.client.security_admin import AclEntry, delete_acls

    resources = _resources(topic, group, transactional_id, cluster)
    if not resources and not (principal and not allow_principal and not deny_principal):
        raise fail("give a resource (--topic, --group, --transactional-id, --cluster), or "
                   "--principal alone to remove every ACL of a principal", 2)
    _hosts_need_principals(allow_principal, allow_host, deny_principal, deny_host)
    pattern_type = resource_pattern_type or ("literal" if resources else "any")
    filters: list[Any] = []
    if allow_principal or deny_principal:
        ptype = _pattern(pattern_type, ("any", "match", "literal", "prefixed"))
        ops = _operations(operation, "all")
        filters += [AclEntry(rt, name, ptype, p, host, op, perm)
                    for perm, principals, hosts in ((3, allow_principal, allow_host),
                                                    (2, deny_principal, deny_host))
                    for p in principals for host in hosts or ["*"]
                    for rt, name in resources for op in ops]
    if principal or not (allow_principal or deny_principal):
        filters += [replace(f, permission_type=1) for f in _filters(
            principal, topic, group, transactional_id, cluster, pattern_type, operation)]
    client = _client(bootstrap, prop, command_config)
    try:
        # an ACL two filters match is removed once
        removed = list(dict.fromkeys(_run(lambda: delete_acls(client, filters))))
    finally:
        client.close()
    _show(removed)
    typer.echo(f"Removed {len(removed)} ACL(s).")


def register(app: typer.Typer) -> None:
    app.add_typer(acls_app, name="acls")
