"""The broker's security stores: SCRAM credentials and ACLs (and the authorizer over them
when `authorizer.class.name` is set). A standalone broker keeps them in its first data dir;
a broker of a ZooKeeper cluster in Kafka's znodes (kafkactl.cluster.acl_zk_store and
scram_zk_store), so every broker enforces the same rules and knows the same users."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kafkactl.broker.config import BrokerConfig
from kafkactl.broker.security import acl_store, credential_store
from kafkactl.broker.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkactl.broker.security.authorizer import AclAuthorizer, parse_super_users
from kafkactl.cluster.acl_zk_store import (
    AclEntry,
    AclResource,
    ZkAclStore,
    pascal_case,
    upper_snake,
)
from kafkactl.cluster.scram_zk_store import ZkCredentialStore

if TYPE_CHECKING:
    from kazoo.client import KazooClient


def binding_from_znode(resource: AclResource, entry: AclEntry) -> AclBinding:
    """An ACL znode's entry as a binding; InvalidAcl / KeyError when it names none."""
    return AclBinding.create(
        ResourceType[upper_snake(resource.resource_type)], resource.name,
        PatternType[resource.pattern_type], entry.principal, entry.host,
        AclOperation[upper_snake(entry.operation)],
        AclPermissionType[upper_snake(entry.permission_type)])


def binding_to_znode(b: AclBinding) -> tuple[AclResource, AclEntry]:
    """(resource, entry) in Kafka's znode names: Topic, Allow, ClusterAction, ..."""
    return (AclResource(pascal_case(b.resource_type.name), b.pattern_type.name,
                        b.resource_name),
            AclEntry(b.principal, pascal_case(b.permission_type.name),
                     pascal_case(b.operation.name), b.host))


def _authorizer(cfg: BrokerConfig, store: acl_store.AclStore) -> AclAuthorizer:
    allow = cfg.get("allow.everyone.if.no.acl.found").strip().lower() == "true"
    return AclAuthorizer(store, super_users=parse_super_users(cfg.get("super.users")),
                         allow_if_no_acl=allow)


def security_stores(cfg: BrokerConfig, data_dir: Path,
                    zk: KazooClient | None = None,
                    ) -> tuple[credential_store.CredentialStore, AclAuthorizer | None]:
    """(credential store, authorizer or None); StoreFileError when a file is damaged. With
    `zk` (blocking: run it off the event loop) the stores are ZooKeeper's, loaded and
    watched."""
    enabled = bool(cfg.get("authorizer.class.name").strip())
    if zk is not None:
        zk_credentials = ZkCredentialStore(zk)
        zk_credentials.start()
        if not enabled:
            return zk_credentials, None
        acls = ZkAclStore(zk, binding_from_znode, binding_to_znode)
        acls.start()
        return zk_credentials, _authorizer(cfg, acls)
    credentials = credential_store.FileCredentialStore(data_dir / credential_store.FILE_NAME)
    credentials.load()
    if not enabled:
        return credentials, None
    file_acls = acl_store.FileAclStore(data_dir / acl_store.FILE_NAME)
    file_acls.load()
    return credentials, _authorizer(cfg, file_acls)
