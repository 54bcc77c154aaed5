"""AclAuthorizer: Kafka's rules for deciding one (principal, host, operation, resource).

1. A super user (`super.users`, `User:a;User:b`) may do everything.
2. The bindings that apply to the resource are the LITERAL ones on its name or on `*`,
   and the PREFIXED ones whose prefix starts its name. If there are none, the answer is
   `allow.everyone.if.no.acl.found` (default false).
3. A DENY binding matching the principal (or `User:*`), the host (or `*`) and the operation
   (or ALL) refuses; otherwise an ALLOW binding that matches the same way, or that allows
   an operation implying this one (Read/Write/Delete/Alter imply Describe, AlterConfigs
   implies DescribeConfigs), allows; otherwise the request is refused.
"""

from __future__ import annotations

from collections.abc import Iterable

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


class AclAuthorizer:
    def __init__(self, store: AclStore, *, super_users: frozenset[str] = frozenset(),
                 allow_if_no_acl: bool = False) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        who = str(principal)
        if who in self.super_users:
            return True
        acls = [b for b in self.store.bindings() if b.resource_type == resource_type and (
            (b.pattern_type == PatternType.LITERAL and b.resource_name in (name, WILDCARD))
            or (b.pattern_type == PatternType.PREFIXED and name.startswith(b.resource_name)))]
        if not acls:
            return self.allow_if_no_acl
        mine = [b for b in acls if b.principal in (who, WILDCARD_PRINCIPAL)
                and b.host in (host, WILDCARD)]
        if any(b.permission_type == AclPermissionType.DENY
               and b.operation in (operation, AclOperation.ALL) for b in mine):
            return False
        allowed_by = {operation, AclOperation.ALL} | IMPLIES.get(operation, frozenset())
        return any(b.permission_type == AclPermissionType.ALLOW and b.operation in allowed_by
                   for b in mine)

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """May `principal` do `operation` on some resource of this type (Kafka's
        authorizeByResourceType, used for idempotent producers)? Super users, a matching
        ALLOW binding that no LITERAL `*` DENY cancels, or allow.everyone.if.no.acl.found
        with no binding at all."""
        who = str(principal)
        if who in self.super_users:
            return True
        mine = [b for b in self.store.bindings() if b.resource_type == resource_type
                and b.principal in (who, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD)
                and b.operation in (operation, AclOperation.ALL)]
        if any(b.permission_type == AclPermissionType.DENY and b.resource_name == WILDCARD
               and b.pattern_type == PatternType.LITERAL for b in mine):
            return False
        if any(b.permission_type == AclPermissionType.ALLOW for b in mine):
            return True
        return self.allow_if_no_acl and not any(
            b.resource_type == resource_type for b in self.store.bindings())

    # ---- the ACL APIs ----------------------------------------------------------------------
    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.store.bindings() if flt.matches(b)]

    def create(self, bindings: Iterable[AclBinding]) -> None:
        self.store.add(bindings)

    def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """The bindings each filter removed (all removed in one store write)."""
        current = self.store.bindings()
        matched = [[b for b in current if f.matches(b)] for f in filters]
        self.store.remove(b for group in matched for b in group)
        return matched
