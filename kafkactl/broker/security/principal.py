"""KafkaPrincipal and the TLS principal: a client certificate's distinguished name in
RFC 2253 form (`CN=alice,OU=eng,O=acme,C=US`) passed through `ssl.principal.mapping.rules`
(Kafka's SslPrincipalMapper: `RULE:pattern/replacement/[LU]` and `DEFAULT`, first match
wins, no match is an authentication failure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kafkactl.broker.security.x500 import subject_rfc2253


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

def distinguished_name(cert_der: bytes) -> str:
    """The subject of a peer certificate (`getpeercert(binary_form=True)`) as Java's
    X500Principal.getName() writes it (RFC 2253, most specific RDN first): the name
    Kafka's ssl.principal.mapping.rules see. CertificateParseError if unreadable."""
    return subject_rfc2253(cert_der)


class NoMatchingRule(Exception):
    """No ssl.principal.mapping.rules rule matched the distinguished name."""


# Kafka's SslPrincipalMapper regexes, with Java's `\s` and `.` spelled out (Python's
# `\s` also takes Unicode spaces, its `.` also takes \r and \u0085 \u2028 \u2029). The
# splitter cuts the list at commas (an entry may be empty: ",,DEFAULT,," is one rule);
# the parser must then match each entry whole.
_WS = "[ \t\n\x0b\f\r]"
_ANY = "[^\n\r\u0085\u2028\u2029]"
_RULE = (rf"(DEFAULT)|RULE:((\\{_ANY}|[^\\/])*)/((\\{_ANY}|[^\\/])*)/([LU]?){_ANY}*?"
         rf"|({_ANY}*?)")
_RULE_SPLITTER = re.compile(rf"{_WS}*({_RULE}){_WS}*(,{_WS}*|$)")
_RULE_PARSER = re.compile(_RULE)
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))  # String.trim(): every char <= ' '


def _split_rules(rules: str) -> list[str]:
    return [m.group(1) for m in _RULE_SPLITTER.finditer(rules.strip(_JAVA_TRIM))]


Replacement = list[str | int]  # literal text and group numbers


def _java_replacement(text: str, groups: int) -> Replacement:
    """A Java replacement string (`$n` a group, a backslash quotes the next character) as
    text and group numbers. As Kafka (escapeLiteralBackReferences): `$n` naming no group is literal
    text, after dropping trailing digits while n >= 10 names no group ($12 with one
    group is group 1 then "2")."""
    out: Replacement = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        j = i + 1
        while j < len(text) and text[j].isdigit() and text[j].isascii():
            j += 1
        if c != "$" or j == i + 1 or text[i + 1] == "0":
            out.append(c)
            i += 1
            continue
        ref, end = int(text[i + 1]), i + 2
        while end < j and ref * 10 + int(text[end]) <= groups:
            ref, end = ref * 10 + int(text[end]), end + 1
        if ref > groups:
            out.append(c)
            i += 1
            continue
        out.append(ref)
        i = end
    return out


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: tuple[str | int, ...]
    case: str
    text: str = "DEFAULT"  # as Kafka's Rule.toString writes it

    def __str__(self) -> str:
        return self.text

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        parts = self.replacement
        name = self.pattern.sub(lambda m: "".join(
            p if isinstance(p, str) else (m.group(p) or "") for p in parts), dn)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name


def _parse_rule(rule: str, rules: str) -> _Rule | None:
    """One entry of the list; None for an empty one (ignored, as Kafka does)."""
    m = _RULE_PARSER.match(rule)
    if m is None or m.end() != len(rule):
        rest = rule[m.end():] if m is not None else rule
        raise ValueError(f"ssl.principal.mapping.rules={rules}: invalid rule {rule!r} "
                         f"(cannot parse {rest!r}; write RULE:pattern/replacement/[LU] or "
                         "DEFAULT, separated by commas)")
    if m.group(1) is not None:
        return _Rule(None, (), "")
    if m.group(2) is None:
        return None
    try:
        pattern = re.compile(m.group(2))
    except re.error as e:
        raise ValueError(f"ssl.principal.mapping.rules: {m.group(2)!r} is not a regular "
                         f"expression: {e}") from None
    case = m.group(6)
    text = f"RULE:{m.group(2)}/{m.group(4)}" + (f"/{case}" if case else "")
    return _Rule(pattern, tuple(_java_replacement(m.group(4), pattern.groups)), case, text)


class SslPrincipalMapper:
    """`ssl.principal.mapping.rules` (default `DEFAULT`: the DN unchanged). Empty entries
    are ignored, as in Kafka (`,,RULE:...,,DEFAULT,,` is two rules; "" none at all)."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        parsed = (_parse_rule(r, rules) for r in _split_rules(rules))
        self.rules: list[_Rule] = [r for r in parsed if r is not None]

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"

    def principal_name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule matches {dn!r}")
