"""Helpers shared by the client subcommands: -b, -X / --command-config, errors."""

from __future__ import annotations

import codecs
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer

BOOTSTRAP_ENV = "KAFKACTL_BOOTSTRAP"
BOOTSTRAP_HELP = ("Broker(s) host:port[,host:port]; default: bootstrap.servers of "
                  "--command-config, else $KAFKACTL_BOOTSTRAP, else 127.0.0.1:9092.")
# the file keys that name the brokers (Java's, librdkafka's)
BOOTSTRAP_KEYS = ("bootstrap.servers", "metadata.broker.list")


def bootstrap_option() -> str | None:
    return typer.Option(None, "--bootstrap-server", "-b", help=BOOTSTRAP_HELP,
                        envvar=BOOTSTRAP_ENV, show_envvar=False, callback=_resolve_bootstrap)


def bootstrap_problem(servers: str) -> str | None:
    """What is wrong with a `host:port[,host:port]` list (None: nothing). A port is
    required, as Kafka's clients require it: `-b 24092` is no host named 24092."""
    entries = [e.strip() for e in servers.split(",") if e.strip()]
    if not entries:
        return "no broker given: expected host:port[,host:port]"
    for entry in entries:
        rest = entry.split("://", 1)[1] if "://" in entry else entry
        if rest.startswith("["):  # [ipv6]:port
            host, _, port = rest[1:].partition("]")
            port = port[1:] if port.startswith(":") else ""
        elif rest.count(":") == 1:
            host, port = rest.split(":")
        elif rest.count(":") > 1:
            return f"{entry!r}: write an IPv6 address as [address]:port"
        else:
            host, port = rest, ""
        if not port and host.isdigit():
            return f"{entry!r} has no host: expected host:port, e.g. 127.0.0.1:{host}"
        if not port:
            return f"{entry!r} has no port: expected host:port, e.g. {host}:9092"
        if not port.isdigit() or not 0 < int(port) < 65536:
            return f"{entry!r}: expected host:port, the port a number from 1 to 65535"
    return None  # (an empty host is this one's, as the client takes it: `:9092`)


def _resolve_bootstrap(ctx: typer.Context, param: typer.CallbackParam,
                       value: str | None) -> str | None:
    """-b's value: -b itself, else bootstrap.servers of --command-config (a file named on
    the command line, its credentials meant for those brokers), else $KAFKACTL_BOOTSTRAP,
    else None (the client's default, 127.0.0.1:9092); each checked for host:port (exit 2).
    Click processes the options given before those that are not, so --command-config has
    been read when -b was not given."""
    source = ctx.get_parameter_source(param.name or "")
    if value is not None and getattr(source, "name", "") == "COMMANDLINE":
        problem = bootstrap_problem(value)
        if problem:
            raise typer.BadParameter(problem)
        return value
    config = ctx.params.get("command_config")
    if config is not None:
        path = Path(config)
        props = read_command_config(path)
        key = next((k for k in BOOTSTRAP_KEYS if k in props), None)
        if key is not None:
            problem = bootstrap_problem(props[key])
            if problem:
                raise fail(f"--command-config {path}: {key}={props[key]}: {problem}", 2)
            return props[key]
    if value is not None:  # $KAFKACTL_BOOTSTRAP
        problem = bootstrap_problem(value)
        if problem:
            raise fail(f"{BOOTSTRAP_ENV}={value}: {problem}", 2)
    return value


def unescape(text: str) -> bytes:
    r"""`\n`, `\t`, `\r`, `\0`, `\xNN`, `\\` -> bytes; the other characters are the
    argument's own bytes, whatever the locale's encoding (os.fsencode undoes the
    surrogateescape decoding of the command line: é in a Latin-1 terminal is the byte E9,
    and a byte that is not UTF-8 in a UTF-8 one is itself)."""
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError:  # (not from the command line: a character of no locale's)
        raw = text.encode("utf-8", "surrogateescape")
    try:
        return codecs.escape_decode(raw)[0]
    except ValueError as e:
        raise typer.BadParameter(f"bad escape in '{text}': {e}") from None


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


def iso_datetime_ms(text: str) -> int:
    """An ISO-8601 date and time (`2024-05-01T12:00:00.000`, optional zone: `Z`, `+05:00`,
    `+0500`, `+05`) -> ms since the epoch, exact (no float rounding). Without a zone the
    time is UTC, never the machine's local time: as Kafka's tools read it
    (Utils.getDateTime appends `Z` to a time with no zone). ValueError when it is none."""
    from datetime import UTC, datetime, timedelta

    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print a clear error on stderr and return an Exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def is_text(arg: str) -> bool:
    """An argument decoded without surrogateescape's stand-ins for undecodable bytes."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(arg: str) -> str:
    r"""An argument as typed: a byte the locale could not decode (surrogateescape's stand-in)
    as \xNN."""
    return "".join(f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else c
                   for c in arg)


def check_text(given: Iterable[tuple[str, str | None]]) -> None:
    """Exit 2 for a setting that is not text (a byte the locale could not decode), before
    anything is sent: `given` is (the option as the user gave it, its value) pairs of
    settings that are strings in Kafka's requests (client.id, transactional.id, a group's
    id), which could not be sent."""
    for shown, value in given:
        if isinstance(value, str) and not is_text(value):
            raise fail(f"{shown}='{printable(value)}': not text in this locale's encoding "
                       f"({sys.getfilesystemencoding()}); it is a UTF-8 string in Kafka's "
                       "requests", 2)


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
# Every command that talks to a broker takes both, with this meaning: the file's
# properties, overlaid by -X, and the command's flags over both. The producing and
# consuming commands read every key of the file as the same -X would be read
# (kafkactl.cli._properties). The others take only security properties through -X (a
# typo is an error); of the file they take those and bootstrap.servers, warn about any
# other client setting (they have no use for it) and refuse a key no Kafka client has.
SECURITY_PROPERTIES = ("security.protocol, sasl.mechanism, sasl.username, sasl.password, "
                       "ssl.ca.location, ssl.certificate.location, ssl.key.location")
SECURITY_HELP = ("Client property key=value, librdkafka's names (repeatable): "
                 f"{SECURITY_PROPERTIES}.")
COMMAND_CONFIG_HELP = ("A properties file of client settings (Kafka's tools' flag): the "
                       "keys -X takes, checked as -X checks them, and bootstrap.servers "
                       "(used without -b); -X and the command's flags override it.")


class _Invocation:
    """What the running command is: set when its --command-config option is processed."""

    takes_bootstrap = True  # it has -b/--bootstrap-server


def property_option(help_text: str = SECURITY_HELP) -> list[str]:
    return typer.Option([], "--property", "-X", help=help_text)


def command_config_option() -> Any:
    return typer.Option(None, "--command-config", metavar="FILE", exists=True,
                        dir_okay=False, help=COMMAND_CONFIG_HELP,
                        callback=_command_config_seen)


def _command_config_seen(ctx: typer.Context, value: Path | None) -> Path | None:
    _Invocation.takes_bootstrap = any(p.name == "bootstrap" for p in ctx.command.params)
    return value


def read_command_config(path: Path | None) -> dict[str, str]:
    """The properties of a --command-config file ({} for None); exit 2 when unreadable."""
    from kafkactl.protocol.properties import parse_properties

    if path is None:
        return {}
    try:
        return parse_properties(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise fail(f"--command-config {path}: {getattr(e, 'strerror', None) or e}",
                   2) from None


def _file_security(path: Path | None) -> dict[str, str]:
    """The security properties of a --command-config file of a command that takes no
    other client setting: another setting Kafka's clients know is warned about (unused),
    a key no client knows is refused (exit 2) with the closest name."""
    from kafkactl.cli._properties import (
        CONSUMER_TABLE,
        PRODUCER_TABLE,
        SECURITY_KEYS,
        unknown_key_hint,
    )

    out: dict[str, str] = {}
    for key, value in read_command_config(path).items():
        if key in SECURITY_KEYS:
            out[key] = value
        elif key in BOOTSTRAP_KEYS and _Invocation.takes_bootstrap:
            continue  # -b's (see _resolve_bootstrap)
        elif key in BOOTSTRAP_KEYS or key in PRODUCER_TABLE or key in CONSUMER_TABLE:
            used = "the security properties" + (" and bootstrap.servers"
                                                if _Invocation.takes_bootstrap else "")
            typer.echo(f"warning: --command-config {path}: {key}: not used by this command "
                       f"(it takes {used} from the file)", err=True)
        else:
            known = [*SECURITY_KEYS, *BOOTSTRAP_KEYS, *PRODUCER_TABLE, *CONSUMER_TABLE]
            raise fail(f"--command-config {path}: {key}: not a client property kafkactl "
                       f"knows{unknown_key_hint(key, known, '')}", 2)
    return out


def client_properties(props: list[str], command_config: Path | None, *,
                      check: bool = True) -> dict[str, str]:
    """The security properties of `--command-config FILE` overlaid by `-X key=value`;
    with `check`, an -X name that is no security property is an error (exit 2)."""
    from kafkactl.cli._properties import SECURITY_KEYS

    try:
        given = parse_key_values(props, "property")
    except typer.BadParameter as e:
        raise fail(str(e), 2) from None
    unknown = sorted(k for k in given if k not in SECURITY_KEYS)
    if check and unknown:
        raise fail(f"-X {unknown[0]}: not a client property this command takes (use "
                   f"{SECURITY_PROPERTIES}, ...)", 2)
    merged = _file_security(command_config)
    merged.update(given)
    return merged


def security_of(props: dict[str, str]) -> Any:
    """The ClientSecurity of security properties; a one-line error (exit 2) for a bad one."""
    from kafkactl.client.security import ClientSecurity, SecurityConfigError

    try:
        return ClientSecurity.from_properties(props)
    except SecurityConfigError as e:
        raise fail(str(e), 2) from None


def client_security(props: list[str], command_config: Path | None) -> Any:
    """The ClientSecurity of `--command-config FILE` overlaid by `-X key=value`; a
    one-line error (exit 2) for a bad one."""
    return security_of(client_properties(props, command_config))
