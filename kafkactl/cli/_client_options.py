"""Helpers shared by the client subcommands (produce, consume, topics)."""

from __future__ import annotations

import codecs
import os
import sys
from collections.abc import Iterable
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


# ---- security: librdkafka's -X names (as kcat takes them) and Kafka tools' --command-config
SECURITY_HELP = ("Client property key=value, librdkafka's names (repeatable): "
                 "security.protocol, sasl.mechanism, sasl.username, sasl.password, "
                 "ssl.ca.location, ssl.certificate.location, ssl.key.location.")


def property_option() -> list[str]:
    return typer.Option([], "--property", "-X", help=SECURITY_HELP)


def command_config_option() -> Any:
    return typer.Option(None, "--command-config", metavar="FILE", exists=True,
                        dir_okay=False,
                        help="A properties file of client settings (Kafka's tools' flag).")


def client_security(props: list[str], command_config: Any) -> Any:
    """The ClientSecurity of `--command-config FILE` overlaid by `-X key=value`; a
    one-line error (exit 2) for a bad one."""
    from kafkactl.broker.config import parse_properties
    from kafkactl.client.security import ClientSecurity, SecurityConfigError

    merged: dict[str, str] = {}
    try:
        if command_config is not None:
            merged.update(parse_properties(command_config.read_text()))
        merged.update(parse_key_values(props, "property"))
        return ClientSecurity.from_properties(merged)
    except (OSError, SecurityConfigError, typer.BadParameter) as e:
        raise fail(str(e), 2) from None
