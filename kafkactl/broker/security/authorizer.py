"""AclAuthorizer: Kafka's rules for deciding one (principal, host, operation, resource).

1. A super user (`super.users`, `User:a;User:b`) may do everything.
2. The bindings that apply to the resource are the LITERAL ones on its name or on `*`,
   and the PREFIXED ones whose prefix starts its name. If there are none, the answer is
   `allow.everyone.if.no.acl.found` (default false).
3. A DENY binding matching the principal (or `User:*`), the host (or `*`) and the operation
   (or ALL) refuses; otherwise an ALLOW binding that matches the same way, or that allows
   an operation implying this one (Read/Write/Delete/Alter imply Describe, AlterConfigs
   implies DescribeConfigs), allows; otherwise the request is refused.

Hosts are compared as Kafka compares them: the ACL's host string against Java's
InetAddress.getHostAddress() of the client, which writes an IPv6 address uncompressed and
without leading zeros (`0:0:0:0:0:0:0:1`, with `%<scope id>` for a scoped one) and an
IPv4-mapped one as IPv4 (`java_host_address`). An ACL whose host is written otherwise
(`::1`) matches no client, as in Kafka; adding one logs a warning.

Every decision goes to the audit logger `kafkactl.authorizer` (Kafka's
kafka.authorizer.logger) in Kafka's words: denials at INFO, allowed requests at DEBUG (a
level check, nothing formatted, when DEBUG is off). ACLs added and removed are logged at
INFO by this module's logger.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import socket
from collections.abc import Iterable, Sequence

from kafkactl.broker.security.acl import (
    IMPLIES,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkactl.broker.security.acl_store import AclStore
from kafkactl.broker.security.principal import KafkaPrincipal
from kafkactl.protocol.api_keys import ApiKey

AUTHORIZER_CLASS_NAMES = ("kafka.security.authorizer.AclAuthorizer",
                          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                          "kafka.security.auth.SimpleAclAuthorizer")


def parse_super_users(value: str) -> frozenset[str]:
    """`super.users` (`User:a;User:b`) -> {"User:a", "User:b"}; ValueError for an entry
    that is not `principalType:principalName` (Kafka's AclAuthorizer refuses to start
    then, rather than leave the user out)."""
    users = [p.strip() for p in value.split(";") if p.strip()]
    for user in users:
        if ":" not in user:
            raise ValueError("expected a string in format principalType:principalName but "
                             f"got {user} (write User:{user})")
    return frozenset(users)


@functools.lru_cache(maxsize=4096)
def java_host_address(host: str) -> str:
    """The client address as Kafka's authorizer and audit log see it, Java's
    InetAddress.getHostAddress(): an IPv4 address as is; an IPv6 one as eight hex groups
    without leading zeros or `::` (`::1` -> `0:0:0:0:0:0:0:1`), lower case, with `%` and
    the numeric scope id when it has one (`fe80::1%eth0` -> `fe80:0:0:0:0:0:0:1%2`, 2
    being eth0's index); an IPv4-mapped one (a dual-stack listener's IPv4 client) as the
    IPv4 address, as Java's sockets give it. Anything else is returned unchanged."""
    if ":" not in host:
        return host
    address, percent, scope = host.partition("%")
    try:
        ip = ipaddress.IPv6Address(address)
    except ValueError:
        return host
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    packed = ip.packed
    text = ":".join(f"{packed[i] << 8 | packed[i + 1]:x}" for i in range(0, 16, 2))
    if percent and scope:
        if not scope.isdigit():  # an interface's name: its index, as Java's socket has it
            with contextlib.suppress(OSError):  # (no such interface here: the name)
                scope = str(socket.if_nametoindex(scope))
        if scope != "0":  # Java sets no scope for 0
            text += f"%{scope}"
    return text


class AclAuthorizer:
    def __init__(self, store: AclStore, *, super_users: frozenset[str] = frozenset(),
                 allow_if_no_acl: bool = False) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str, api_key: int = -1,
                  refs: Sequence[str] | None = None, log_if_allowed: bool = True,
                  log_if_denied: bool = True) -> bool:
        """May `principal` from `host` do `operation` on the resource (a LITERAL name)?
        The answer goes to the audit log (kafkactl.authorizer) as Kafka's does: a denial at
        INFO when `log_if_denied`, an allowed request at DEBUG when `log_if_allowed`, with
        the request's `api_key` and how many times `refs` (the request's resource names;
        None: once) names the resource (Kafka's resourceRefCount). `host` is the client's
        address, compared and logged in Java's form (java_host_address)."""
        who = str(principal)
        if ":" in host:  # IPv6 (an IPv4 address is already Java's form)
            host = java_host_address(host)
        if who in self.super_users:
            allowed = True
        else:
            acls = [b for b in self.store.bindings() if b.resource_type == resource_type and (
                (b.pattern_type == PatternType.LITERAL and b.resource_name in (name, WILDCARD))
                or (b.pattern_type == PatternType.PREFIXED
                    and name.startswith(b.resource_name)))]
            if not acls:
                allowed = self.allow_if_no_acl
            else:
                mine = [b for b in acls if b.principal in (who, WILDCARD_PRINCIPAL)
                        and b.host in (host, WILDCARD)]
                if any(b.permission_type == AclPermissionType.DENY
                       and b.operation in (operation, AclOperation.ALL) for b in mine):
                    allowed = False
                else:
                    allowed_by = {operation, AclOperation.ALL} | IMPLIES.get(operation,
                                                                             frozenset())
                    allowed = any(b.permission_type == AclPermissionType.ALLOW
                                  and b.operation in allowed_by for b in mine)
        # one level check on the hot path (the logger's own cache of isEnabledFor, which
        # setLevel clears): nothing is formatted unless it is logged
        if allowed:
            if not log_if_allowed:
                return True
            try:
                debug = _audit_levels[_DEBUG]
            except KeyError:
                debug = audit_log.isEnabledFor(_DEBUG)
            if debug:
                log_decision(logging.DEBUG, who, True, operation, host, resource_type,
                             PatternType.LITERAL, name, api_key,
                             1 if refs is None else refs.count(name))
        elif log_if_denied and audit_log.isEnabledFor(logging.INFO):
            log_decision(logging.INFO, who, False, operation, host, resource_type,
                         PatternType.LITERAL, name, api_key,
                         1 if refs is None else refs.count(name))
        return allowed

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                      resource_type: ResourceType, api_key: int = -1) -> bool:
        """May `principal` do `operation` on some resource of this type (Kafka's
        AclAuthorizer.authorizeByResourceType, which lets an idempotent producer with Write
        on any topic in)? Audited as Kafka does, on the resource `Type:UNKNOWN:NONE`."""
        who = str(principal)
        if ":" in host:  # IPv6 (an IPv4 address is already Java's form)
            host = java_host_address(host)
        allowed = who in self.super_users or by_resource_type(
            self.store.bindings(), who, host, operation, resource_type, self.allow_if_no_acl)
        if audit_log.isEnabledFor(logging.DEBUG if allowed else logging.INFO):
            log_decision(logging.DEBUG if allowed else logging.INFO, who, allowed, operation,
                         host, resource_type, PatternType.UNKNOWN, "NONE", api_key, 0)
        return allowed

    # ---- the ACL APIs ----------------------------------------------------------------------
    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.store.bindings() if flt.matches(b)]

    def create(self, bindings: Iterable[AclBinding]) -> None:
        new = list(bindings)
        self.store.add(new)
        for b in new:
            log.info("Added ACL %s", describe_binding(b))
            if b.host != WILDCARD and java_host_address(b.host) != b.host:
                log.warning("ACL host %s matches no client: Kafka compares a client's "
                            "address written as Java writes it (%s)", b.host,
                            java_host_address(b.host))

    def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """The bindings each filter removed (all removed in one store write). A binding
        several filters match is reported once, under the first of them, as Kafka's
        AclAuthorizer.deleteAcls does."""
        matched: list[list[AclBinding]] = [[] for _ in filters]
        removed: set[AclBinding] = set()
        for b in self.store.bindings():
            first = next((i for i, f in enumerate(filters) if f.matches(b)), None)
            if first is not None:
                matched[first].append(b)
                removed.add(b)
        self.store.remove(removed)
        for b in removed:
            log.info("Removed ACL %s", describe_binding(b))
        return matched


def by_resource_type(bindings: Iterable[AclBinding], who: str, host: str,
                     operation: AclOperation, resource_type: ResourceType,
                     allow_if_no_acl: bool) -> bool:
    """Kafka's authorizeByResourceType over the bindings that match the principal (or
    User:*), the host (or *) and the operation (or All): refused by a LITERAL DENY on `*`;
    else allowed with allow.everyone.if.no.acl.found; else allowed by an ALLOW that no
    DENY cancels: a PREFIXED allow unless a PREFIXED deny's prefix starts it, a LITERAL
    allow of `*`, or of a name no LITERAL deny names and no PREFIXED deny's prefix starts."""
    deny_literal: set[str] = set()
    deny_prefixed: set[str] = set()
    allow_literal: set[str] = set()
    allow_prefixed: set[str] = set()
    for b in bindings:
        if b.resource_type != resource_type or b.principal not in (who, WILDCARD_PRINCIPAL) \
                or b.host not in (host, WILDCARD) \
                or b.operation not in (operation, AclOperation.ALL):
            continue
        deny = b.permission_type == AclPermissionType.DENY
        if b.pattern_type == PatternType.LITERAL:
            (deny_literal if deny else allow_literal).add(b.resource_name)
        else:
            (deny_prefixed if deny else allow_prefixed).add(b.resource_name)
    if WILDCARD in deny_literal:
        return False
    if allow_if_no_acl:
        return True
    if not deny_literal and not deny_prefixed:
        return bool(allow_literal or allow_prefixed)

    def denied_by_prefix(name: str) -> bool:
        return any(name.startswith(prefix) for prefix in deny_prefixed)

    return any(not denied_by_prefix(p) for p in allow_prefixed) or any(
        n == WILDCARD or (n not in deny_literal and not denied_by_prefix(n))
        for n in allow_literal)


# ---- the audit log (Kafka's kafka.authorizer.logger) -------------------------------------
audit_log = logging.getLogger("kafkactl.authorizer")
# Logger.isEnabledFor's answers, by level, kept by the logger and emptied by every setLevel
# (a KIP-412 change included): read first, so that a request allowed while DEBUG is off
# costs a dict lookup; an empty entry falls back to isEnabledFor, which fills it.
_audit_levels: dict[int, bool] = getattr(audit_log, "_cache", {})
_DEBUG = logging.DEBUG
log = logging.getLogger(__name__)
_AUDIT_FORMAT = ("Principal = %s is %s Operation = %s from host = %s on resource = %s:%s:%s "
                 "for request = %s with resourceRefCount = %d")


def _kafka_name(upper_snake: str) -> str:
    """IDEMPOTENT_WRITE -> IdempotentWrite (Kafka's SecurityUtils names), INIT_PRODUCER_ID
    -> InitProducerId (its ApiKeys names)."""
    return "".join(word.capitalize() for word in upper_snake.split("_"))


def _request_name(api_key: int) -> str:
    try:
        return _kafka_name(ApiKey(api_key).name)
    except ValueError:
        return str(api_key)


def log_decision(level: int, who: str, allowed: bool, operation: AclOperation, host: str,
                 resource_type: ResourceType, pattern_type: PatternType, name: str,
                 api_key: int, ref_count: int) -> None:
    """One audit line, in Kafka's words: `Principal = User:bob is Denied Operation = Write
    from host = 127.0.0.1 on resource = Topic:LITERAL:orders for request = Produce with
    resourceRefCount = 1`."""
    audit_log.log(level, _AUDIT_FORMAT, who, "Allowed" if allowed else "Denied",
                  _kafka_name(operation.name), host, _kafka_name(resource_type.name),
                  pattern_type.name, name, _request_name(api_key), ref_count)


def describe_binding(b: AclBinding) -> str:
    """Kafka's AclBinding.toString."""
    return (f"(pattern=ResourcePattern(resourceType={b.resource_type.name}, "
            f"name={b.resource_name}, patternType={b.pattern_type.name}), "
            f"entry=(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission_type.name}))")
