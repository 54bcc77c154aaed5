"""Kafka's JAAS configuration text, as `sasl.jaas.config` holds it:

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret";

one or more `<LoginModule class> <flag> key=value...;` entries; values quoted or bare."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))')


class JaasConfigError(ValueError):
    """Text that is not a JAAS configuration; the message never quotes a value."""


@dataclass
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas_config(text: str) -> list[LoginModule]:
    tokens: list[tuple[str, str]] = []  # (kind, value): kind is "s" (string), "=" or ";"
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasConfigError(f"unexpected character at position {pos}")
        if m.group(1) is not None:
            tokens.append(("s", re.sub(r"\\(.)", r"\1", m.group(1))))
        elif m.group(2) is not None:
            tokens.append(("s", m.group(2)))
        else:
            tokens.append((m.group(3) or m.group(4), ""))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    modules: list[LoginModule] = []
    i = 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "s" or tokens[i + 1][0] != "s" \
                or tokens[i + 1][1].lower() not in _FLAGS:
            raise JaasConfigError("each entry must start with a login module class and a "
                                  "flag (required, requisite, sufficient or optional)")
        module = LoginModule(tokens[i][1], tokens[i + 1][1].lower())
        i += 2
        while i < len(tokens) and tokens[i][0] != ";":
            if i + 2 >= len(tokens) or tokens[i][0] != "s" or tokens[i + 1][0] != "=" \
                    or tokens[i + 2][0] != "s":
                raise JaasConfigError(f"option {i} of {module.class_name} must look like "
                                      'key="value"')
            module.options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasConfigError("an entry does not end with ';'")
        i += 1
        modules.append(module)
    if not modules:
        raise JaasConfigError("no login module")
    return modules


def plain_users(text: str) -> dict[str, str]:
    """The `user_<name>="<password>"` options of the PlainLoginModule entry."""
    for module in parse_jaas_config(text):
        if module.class_name == PLAIN_LOGIN_MODULE:
            return {k[5:]: v for k, v in module.options.items() if k.startswith("user_")}
    raise JaasConfigError(f"no {PLAIN_LOGIN_MODULE} entry")
