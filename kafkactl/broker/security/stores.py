"""The standalone broker's security stores in its first data dir: SCRAM credentials and
ACLs (and the authorizer over them when `authorizer.class.name` is set)."""

from __future__ import annotations

from pathlib import Path

from kafkactl.broker.config import BrokerConfig
from kafkactl.broker.security import acl_store, credential_store
from kafkactl.broker.security.authorizer import AclAuthorizer, parse_super_users


def security_stores(cfg: BrokerConfig,
                    data_dir: Path) -> tuple[credential_store.FileCredentialStore,
                                             AclAuthorizer | None]:
    """(credential store, authorizer or None); StoreFileError when a file is damaged."""
    credentials = credential_store.FileCredentialStore(data_dir / credential_store.FILE_NAME)
    credentials.load()
    if not cfg.get("authorizer.class.name").strip():
        return credentials, None
    acls = acl_store.FileAclStore(data_dir / acl_store.FILE_NAME)
    acls.load()
    allow = cfg.get("allow.everyone.if.no.acl.found").strip().lower() == "true"
    return credentials, AclAuthorizer(acls, super_users=parse_super_users(
        cfg.get("super.users")), allow_if_no_acl=allow)
