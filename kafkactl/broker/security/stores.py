"""The broker's security stores: SCRAM credentials and ACLs (and the authorizer over them
when `authorizer.class.name` is set). A standalone broker keeps them in its first data dir;
a broker of a ZooKeeper cluster in Kafka's znodes (kafkactl.cluster.acl_zk_store and
scram_zk_store), so every broker enforces the same rules and knows the same users."""

from __future__ import annotations

import logging
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

log = logging.getLogger(__name__)


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
        acls = ZkAclStore(zk, binding_from_znode, binding_to_znode)
        acls.start()
        _adopt(data_dir, zk_credentials, acls)
        return zk_credentials, _authorizer(cfg, acls) if enabled else None
    credentials = credential_store.FileCredentialStore(data_dir / credential_store.FILE_NAME)
    credentials.load()
    if not enabled:
        return credentials, None
    file_acls = acl_store.FileAclStore(data_dir / acl_store.FILE_NAME)
    file_acls.load()
    return credentials, _authorizer(cfg, file_acls)


def _adopt(data_dir: Path, credentials: ZkCredentialStore,
           acls: ZkAclStore[AclBinding]) -> None:
    """A standalone data dir joining a cluster: its users and ACLs are added to ZooKeeper's
    (a user ZooKeeper already has keeps ZooKeeper's credentials), then the files are
    renamed `*.adopted`, as the topics are: from now on ZooKeeper alone holds them."""
    users_file = data_dir / credential_store.FILE_NAME
    if users_file.exists():
        local = credential_store.FileCredentialStore(users_file)
        local.load()
        known = credentials.users()
        credentials.alter({(u, m): c for u, creds in local.users().items() if u not in known
                           for m, c in creds.items()}, set())
        users_file.rename(users_file.with_name(users_file.name + ".adopted"))
        log.info("adopted %d SCRAM user(s) of %s into ZooKeeper", len(local.users()),
                 users_file)
    acls_file = data_dir / acl_store.FILE_NAME
    if acls_file.exists():
        local_acls = acl_store.FileAclStore(acls_file)
        local_acls.load()
        acls.add(local_acls.bindings())
        acls_file.rename(acls_file.with_name(acls_file.name + ".adopted"))
        log.info("adopted %d ACL(s) of %s into ZooKeeper", len(local_acls.bindings()),
                 acls_file)
