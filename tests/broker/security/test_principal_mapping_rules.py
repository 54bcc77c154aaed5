"""`ssl.principal.mapping.rules` parsed as Kafka's SslPrincipalMapper parses it (its
SslPrincipalMapperTest cases): empty entries between commas are ignored
(`,,RULE:...,,,DEFAULT,,` is two rules), escapes, `$n` naming no group is literal text.
Before, an empty entry made the broker refuse to start. On a live broker: such a list
maps an mTLS client's certificate to its principal."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkactl.broker.security.principal import NoMatchingRule, SslPrincipalMapper
from tests.broker.security.certs import Certs
from tests.broker.security.conftest import ACL_AUTHORIZER, start_secure
from tests.polling import wait_until

SPLITTING = [  # Kafka's testRulesSplitting: (toString of the rules, the config value)
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
     "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    ("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, "
     "/DEFAULT, DEFAULT]",
     "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
     "/DEFAULT/,DEFAULT"),
]
VALID = ["DEFAULT", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
         "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
         "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
         "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
         "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
         "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/", "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/"]
INVALID = ["default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
           "RULE:CN=(.*?),OU=ServiceUsers.*/$1", "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
           "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U", "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
           "RULE:^CN=(.*?),OU=ServiceUsers.*$/U", "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU"]


@pytest.mark.parametrize(("expected", "rules"), SPLITTING)
def test_rules_split_as_kafka_splits_them(expected: str, rules: str) -> None:
    assert str(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_valid_and_invalid_rules() -> None:
    for rules in VALID:
        SslPrincipalMapper(rules)
    for rules in INVALID:
        with pytest.raises(ValueError):
            SslPrincipalMapper(rules)


def test_mapping() -> None:
    mapper = SslPrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U", "DEFAULT"]))
    assert mapper.principal_name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.principal_name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.principal_name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.principal_name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.principal_name("OU=JavaSoft,O=Sun Microsystems,C=US") == \
        "OU=JavaSoft,O=Sun Microsystems,C=US"
    comma = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert comma.principal_name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"
    # $n beyond the groups is literal text; $12 with one group is group 1 then "2"
    odd = SslPrincipalMapper("RULE:^CN=(.*)$/$1-$2-$12-\\$1/")
    assert odd.principal_name("CN=bob") == "bob-$2-bob2-$1"
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper(",, ,").principal_name("CN=x")


def test_a_broker_with_empty_entries_maps_a_certificate(
        certs: Certs, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    rules = ",, RULE:^CN=([a-z]+),OU=eng,O=kafkactl$/$1-mapped/L ,,,DEFAULT,,"
    sb = start_secure(tmp_path, certs, **ACL_AUTHORIZER,
                      **{"listener.name.ssl.ssl.principal.mapping.rules": rules})
    try:
        errors: list[str] = []
        p = Producer({"bootstrap.servers": sb.bootstrap("SSL"), "security.protocol": "SSL",
                      "ssl.ca.location": str(certs.ca),
                      "ssl.certificate.location": str(certs.client_cert),
                      "ssl.key.location": str(certs.client_key),
                      "message.timeout.ms": 10000})
        p.produce("mapped", b"x", on_delivery=lambda e, _m: errors.append(e.name() if e else ""))
        p.flush(30)
        assert errors == ["TOPIC_AUTHORIZATION_FAILED"]  # no ACL for alice-mapped
        wait_until(lambda: "Principal = User:alice-mapped is Denied" in sb.broker.log(), 10,
                   "the mapped principal in the audit log")
    finally:
        sb.broker.kill()
