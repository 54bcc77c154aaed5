"""Kafka's ACL model: resource types, pattern types, operations and permissions with
Kafka's codes (the ACL APIs carry them as int8), AclBinding and AclBindingFilter.

A binding allows or denies `principal` from `host` an `operation` on resources named by
a pattern: LITERAL (the name, or `*` for all) or PREFIXED (every name starting with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from kafkactl.cluster.zk_paths import znode_name_problem


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"
WILDCARD_PRINCIPAL = "User:*"

# Operations each resource type supports (Kafka's AclEntry.supportedOperations): what
# Kafka's kafka-acls tool allows; the broker stores any operation on any type.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE,
                                   AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset({
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

# An allowed operation also allows these (Kafka's implied operations).
IMPLIES: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}


class InvalidAcl(ValueError):
    """A binding or filter Kafka would refuse (INVALID_REQUEST); the message says why."""


def _name(enum: type[IntEnum], code: int) -> str:
    try:
        return enum(code).name
    except ValueError:
        return f"code {code}"


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def create(cls, resource_type: int, resource_name: str, pattern_type: int,
               principal: str, host: str, operation: int, permission_type: int, *,
               stored: bool = False) -> AclBinding:
        """A binding from the wire's codes; InvalidAcl as Kafka's CreateAcls checks.

        A new binding's resource name must be able to name a znode, in every mode (Kafka's
        AclAuthorizer refuses '/'; ZooKeeper '.', '..' and control characters): kafkactl's
        authorizer is Kafka's ZooKeeper-mode one, and a standalone data dir's ACLs move into
        ZooKeeper when it joins a cluster. `stored`: a binding read back from a store,
        which an older kafkactl may have written with such a name: loaded, not refused."""
        if resource_type not in ResourceType._value2member_map_ or resource_type in (
                ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidAcl(f"invalid resource type {_name(ResourceType, resource_type)}")
        if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"invalid resource pattern type "
                             f"{_name(PatternType, pattern_type)}: use LITERAL or PREFIXED")
        if operation not in AclOperation._value2member_map_ or operation in (
                AclOperation.ANY, AclOperation.UNKNOWN):
            raise InvalidAcl(f"invalid operation {_name(AclOperation, operation)}")
        if permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidAcl(f"invalid permission type "
                             f"{_name(AclPermissionType, permission_type)}")
        # No check of the operation against the resource type: Kafka's broker takes any
        # (WRITE on a GROUP is stored and never matches); only its kafka-acls tool checks.
        rtype, op = ResourceType(resource_type), AclOperation(operation)
        if not resource_name:
            raise InvalidAcl("the resource name must not be empty")
        if rtype == ResourceType.CLUSTER and resource_name != CLUSTER_NAME:
            raise InvalidAcl(f"the cluster resource must be named {CLUSTER_NAME}")
        problem = None if stored else znode_name_problem(resource_name)
        if problem is not None:
            raise InvalidAcl(f"ACL binding contains invalid resource name: {resource_name!r} "
                             f"({problem}: ACLs are kept in ZooKeeper under the name)")
        ptype, sep, pname = principal.partition(":")
        if not sep or not ptype or not pname:
            raise InvalidAcl(f"principal {principal!r} must look like User:NAME")
        if not host:
            raise InvalidAcl("the host must not be empty (use * for every host)")
        return cls(rtype, resource_name, PatternType(pattern_type), principal, host, op,
                   AclPermissionType(permission_type))

    def to_dict(self) -> dict[str, object]:
        return {"resource_type": self.resource_type.name, "name": self.resource_name,
                "pattern_type": self.pattern_type.name, "principal": self.principal,
                "host": self.host, "operation": self.operation.name,
                "permission_type": self.permission_type.name}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> AclBinding:
        return cls.create(ResourceType[str(d["resource_type"])], str(d["name"]),
                          PatternType[str(d["pattern_type"])], str(d["principal"]),
                          str(d["host"]), AclOperation[str(d["operation"])],
                          AclPermissionType[str(d["permission_type"])], stored=True)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls / DeleteAcls filter: None (or ANY) matches everything; MATCH matches
    the bindings that would apply to a resource of that exact name."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def validate(self) -> None:
        for value, enum, what in ((self.resource_type, ResourceType, "resource type"),
                                  (self.pattern_type, PatternType, "pattern type"),
                                  (self.operation, AclOperation, "operation"),
                                  (self.permission_type, AclPermissionType,
                                   "permission type")):
            if value not in enum._value2member_map_ or value == 0:
                raise InvalidAcl(f"invalid {what} {_name(enum, value)} in the filter")

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and b.resource_type != self.resource_type:
            return False
        if not self._matches_pattern(b):
            return False
        if self.principal is not None and b.principal != self.principal:
            return False
        if self.host is not None and b.host != self.host:
            return False
        if self.operation != AclOperation.ANY and b.operation != self.operation:
            return False
        return self.permission_type in (AclPermissionType.ANY, b.permission_type)

    def _matches_pattern(self, b: AclBinding) -> bool:
        name, ptype = self.resource_name, self.pattern_type
        if ptype == PatternType.MATCH:
            if name is None:
                return True
            if b.pattern_type == PatternType.LITERAL:
                return b.resource_name in (name, WILDCARD)
            return name.startswith(b.resource_name)
        if ptype not in (PatternType.ANY, b.pattern_type):
            return False
        return name is None or b.resource_name == name
