"""Helpers shared by the client subcommands: -b, -X / --command-config, errors."""

from __future__ import annotations

import codecs
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer

BOOTSTRAP_HELP = "Broker(s) host:port[,host:port]; default $KAFKACTL_BOOTSTRAP or 127.0.0.1:9092."


def bootstrap_option() -> str | None:
    return typer.Option(None, "--bootstrap-server", "-b", help=BOOTSTRAP_HELP,
                        envvar="KAFKACTL_BOOTSTRAP", show_envvar=False)


def unescape(text: str) -> bytes:
    r"""`\n`, `\t`, `\r`, `\0`, `\xNN`, `\\` -> bytes."""
    try:
        return codecs.escape_decode(text.encode("utf-8"))[0]
    except ValueError as e:
        raise typer.BadParameter(f"bad escape in {text!r}: {e}") from None


def parse_key_values(items: Iterable[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise typer.BadParameter(f"{what} {item!r} must look like key=value")
        out[k.strip()] = v
    return out


def flag_or_property(flag: str | None, prop: list[str], key: str, flag_name: str,
                     refused: dict[str, str] | None = None, refused_as: str = ""
                     ) -> tuple[str | None, list[str]]:
    """An option that Kafka's console tools take as `--property KEY=VALUE` (-X here too):
    the flag's value or the property's (the last given), and the other -X items; the two
    must agree, and the `refused` keys (key -> what does their work here; `refused_as`
    says what they are) are refused. fail(..., 2) otherwise."""
    given: str | None = None
    rest: list[str] = []
    for item in prop:
        name, sep, value = item.partition("=")
        name = name.strip()
        if sep and name == key:
            given = value
            continue
        if refused and name in refused:
            raise fail(f"-X {name}: {refused_as}; {refused[name]}", 2)
        rest.append(item)
    if flag is not None and given is not None and flag != given:
        raise fail(f"{flag_name} {flag} and -X {key}={given} disagree: give one", 2)
    return (flag if flag is not None else given), rest


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print a clear error on stderr and return an Exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def stderr_is_tty() -> bool:
    try:
        return os.isatty(sys.stderr.fileno())
    except (OSError, ValueError):
        return False


def connect_zookeeper(connect: str) -> Any:
    """A kazoo client for a `--zookeeper` option, or a one-line error (exit 1)."""
    from kafkactl.cluster import zookeeper as zkconn

    try:
        return zkconn.connect(connect, timeout_s=10, create_chroot=False, what="--zookeeper")
    except (zkconn.ZooKeeperUnavailable, ValueError) as e:
        raise fail(str(e)) from None


# ---- security: librdkafka's -X names (as kcat takes them) and Kafka tools' --command-config.
# Every command that talks to a broker takes both, with this meaning: the file's security
# properties, overlaid by -X. -X names are checked (a typo is an error); other keys in the
# file are ignored, as Kafka's tools ignore what they do not use.
SECURITY_PROPERTIES = ("security.protocol, sasl.mechanism, sasl.username, sasl.password, "
                       "ssl.ca.location, ssl.certificate.location, ssl.key.location")
SECURITY_HELP = ("Client property key=value, librdkafka's names (repeatable): "
                 f"{SECURITY_PROPERTIES}.")
COMMAND_CONFIG_HELP = ("A properties file of client settings (Kafka's tools' flag); -X "
                       "overrides it.")


def property_option(help_text: str = SECURITY_HELP) -> list[str]:
    return typer.Option([], "--property", "-X", help=help_text)


def command_config_option() -> Any:
    return typer.Option(None, "--command-config", metavar="FILE", exists=True,
                        dir_okay=False, help=COMMAND_CONFIG_HELP)


def client_properties(props: list[str], command_config: Path | None, *,
                      check: bool = True) -> dict[str, str]:
    """The security properties of `--command-config FILE` overlaid by `-X key=value`;
    with `check`, an -X name that is no security property is an error (exit 2)."""
    from kafkactl.client.security import SECURITY_KEYS
    from kafkactl.protocol.properties import parse_properties

    merged: dict[str, str] = {}
    try:
        if command_config is not None:
            merged.update((k, v) for k, v in parse_properties(command_config.read_text())
                          .items() if k in SECURITY_KEYS)
        given = parse_key_values(props, "property")
    except (OSError, typer.BadParameter) as e:
        raise fail(str(e), 2) from None
    unknown = sorted(k for k in given if k not in SECURITY_KEYS)
    if check and unknown:
        raise fail(f"-X {unknown[0]}: not a client property this command takes (use "
                   f"{SECURITY_PROPERTIES}, ...)", 2)
    merged.update(given)
    return merged


def client_security_from(given: dict[str, str], command_config: Path | None) -> Any:
    """The ClientSecurity of `--command-config FILE`'s security properties overlaid by
    `given` (the security properties of -X, already split from the others: see
    kafkactl.cli._properties); a one-line error (exit 2) for a bad one."""
    from kafkactl.client.security import ClientSecurity, SecurityConfigError

    props = client_properties([], command_config)
    props.update(given)
    try:
        return ClientSecurity.from_properties(props)
    except SecurityConfigError as e:
        raise fail(str(e), 2) from None


def client_security(props: list[str], command_config: Path | None) -> Any:
    """The ClientSecurity of `--command-config FILE` overlaid by `-X key=value`; a
    one-line error (exit 2) for a bad one."""
    from kafkactl.client.security import ClientSecurity, SecurityConfigError

    try:
        return ClientSecurity.from_properties(client_properties(props, command_config))
    except SecurityConfigError as e:
        raise fail(str(e), 2) from None
