"""`kafkactl users add|list|delete` and `kafkactl acls add|list|remove` with kafka-acls'
flags, run over SASL_SSL with `-X` properties and `--command-config FILE`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests import zygote
from tests.broker.security.certs import Certs
from tests.broker.security.conftest import PASSWORDS, SecureBroker, start_secure

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin;User:ANONYMOUS"}


def kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=60)


def test_users_and_acls_from_the_cli(certs: Certs, tmp_path: Path) -> None:
    sb: SecureBroker = start_secure(tmp_path, certs, **AUTHORIZER)
    try:
        admin = ["-b", sb.bootstrap("SASL_SSL"), "-X", "security.protocol=SASL_SSL",
                 "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=admin",
                 "-X", f"sasl.password={PASSWORDS['admin']}",
                 "-X", f"ssl.ca.location={certs.ca}"]
        r = kafkactl("users", "add", "dave", "--password", "dave-secret", *admin)
        assert r.returncode == 0, r.stderr
        r = kafkactl("users", "list", *admin)
        assert "dave\tSCRAM-SHA-256 (iterations=4096), SCRAM-SHA-512" in r.stdout, r.stderr
        r = kafkactl("acls", "add", "--allow-principal", "User:dave", "--operation", "Write",
                     "--operation", "Describe", "--operation", "Create", "--topic", "logs-",
                     "--resource-pattern-type", "prefixed", *admin)
        assert r.returncode == 0 and "Added 3 ACL(s)" in r.stdout, r.stderr
        r = kafkactl("acls", "list", "--principal", "User:dave", *admin)
        assert "Topic:PREFIXED:logs-\tprincipal=User:dave, host=*, operation=Write, " \
               "permissionType=Allow" in r.stdout, r.stdout + r.stderr
        # dave, from a --command-config file, may write logs-app but not other
        config = tmp_path / "dave.properties"
        config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                          "sasl.username=dave\nsasl.password=dave-secret\n"
                          f"ssl.ca.location={certs.ca}\n")
        ok = zygote.run(["produce", "-t", "logs-app", "-b", sb.bootstrap("SASL_SSL"), "-X",
                         f"ssl.ca.location={certs.ca}", "-X", "security.protocol=SASL_SSL",
                         "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=dave",
                         "-X", "sasl.password=dave-secret", "-q"],
                        input="one\ntwo\n", text=True, timeout=60)
        assert ok.returncode == 0, ok.stderr
        r = kafkactl("users", "list", "--command-config", str(config), "-b",
                     sb.bootstrap("SASL_SSL"))
        assert r.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED" in r.stderr, r.stderr
        r = kafkactl("acls", "remove", "--allow-principal", "User:dave", "--operation",
                     "Write", "--topic", "logs-", "--resource-pattern-type", "prefixed",
                     *admin)
        assert "Removed 1 ACL(s)" in r.stdout, r.stdout + r.stderr
        r = kafkactl("users", "delete", "dave", *admin)
        assert r.returncode == 0, r.stderr
        assert "dave" not in kafkactl("users", "list", *admin).stdout
        r = kafkactl("acls", "add", "--allow-principal", "User:x", "--operation", "Fly",
                     "--topic", "t", *admin)
        assert r.returncode == 2 and "unknown operation" in r.stderr
    finally:
        sb.broker.kill()
