"""KafkaPrincipal and the TLS principal: a client certificate's distinguished name in
RFC 2253 form (`CN=alice,OU=eng,O=acme,C=US`) passed through `ssl.principal.mapping.rules`
(Kafka's SslPrincipalMapper: `RULE:pattern/replacement/[LU]` and `DEFAULT`, first match
wins, no match is an authentication failure)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` -> KafkaPrincipal; ValueError without a `Type:` prefix."""
        ptype, sep, name = text.partition(":")
        if not sep or not ptype or not name:
            raise ValueError(f"principal {text!r} must look like User:NAME")
        return cls(ptype, name)


USER_TYPE = "User"
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")

# getpeercert() attribute names -> the short names Java's X500Principal.getName() uses.
_SHORT_NAMES = {
    "commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
    "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
    "emailAddress": "1.2.840.113549.1.9.1",
}
_RFC2253_SPECIAL = re.compile(r'([,+"\\<>;])')


def _escape(value: str) -> str:
    value = _RFC2253_SPECIAL.sub(r"\\\1", value)
    if value.startswith(("#", " ")):
        value = "\\" + value
    if value.endswith(" ") and not value.endswith("\\ "):
        value = value[:-1] + "\\ "
    return value


def distinguished_name(peercert: dict[str, Any]) -> str:
    """The subject of `ssl.SSLSocket.getpeercert()` as RFC 2253 text (most specific RDN
    first, as Java prints it)."""
    rdns = []
    for rdn in reversed(peercert.get("subject", ())):
        rdns.append("+".join(f"{_SHORT_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


class NoMatchingRule(Exception):
    """No ssl.principal.mapping.rules rule matched the distinguished name."""


_RULE_LIST = re.compile(
    r"\s*((DEFAULT)|RULE:((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/([LU])?)\s*(?:,\s*|$)")


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str


def _java_replacement(text: str) -> str:
    """Java's `$1` group references -> Python's `\\g<1>`."""
    out = re.sub(r"\\(.)", lambda m: m.group(1), text)
    out = out.replace("\\", "\\\\")
    return re.sub(r"\$(\d+)", r"\\g<\1>", out)


class SslPrincipalMapper:
    """`ssl.principal.mapping.rules` (default `DEFAULT`: the DN unchanged)."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        text = rules.strip() or "DEFAULT"
        pos = 0
        while pos < len(text):
            m = _RULE_LIST.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"ssl.principal.mapping.rules={rules}: cannot parse the "
                                 f"rule at {text[pos:]!r} (use RULE:pattern/replacement/[LU] "
                                 "or DEFAULT, separated by commas)")
            if m.group(2):
                self.rules.append(_Rule(None, "", ""))
            else:
                try:
                    pattern = re.compile(m.group(3))
                except re.error as e:
                    raise ValueError(f"ssl.principal.mapping.rules: {m.group(3)!r} is not "
                                     f"a regular expression: {e}") from None
                self.rules.append(_Rule(pattern, _java_replacement(m.group(4)),
                                        m.group(5) or ""))
            pos = m.end()

    def principal_name(self, dn: str) -> str:
        for rule in self.rules:
            if rule.pattern is None:
                return dn
            if rule.pattern.fullmatch(dn):
                name = rule.pattern.sub(rule.replacement, dn)
                if rule.case == "L":
                    name = name.lower()
                elif rule.case == "U":
                    name = name.upper()
                return name
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule matches {dn!r}")
