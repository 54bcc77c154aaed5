"""`kafkactl users add|list|delete`: SCRAM users (kafka-configs --entity-type users, through
the AlterUserScramCredentials API; the salted password is computed here, the broker stores
salt, StoredKey, ServerKey and iterations only)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from kafkactl.cli._client_options import (
    bootstrap_option,
    client_security,
    command_config_option,
    fail,
    property_option,
)

if TYPE_CHECKING:
    from kafkactl.cluster.scram_zk_store import ZkCredentialStore

T = TypeVar("T")
users_app = typer.Typer(help="Add, list and delete SCRAM users.", no_args_is_help=True)
MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def _mechanisms(mechanism: list[str]) -> list[str]:
    names = [m.upper() for m in mechanism] or MECHANISMS
    for m in names:
        if m not in MECHANISMS:
            raise fail(f"--mechanism {m}: use {' or '.join(MECHANISMS)}", 2)
    return names


ZOOKEEPER_HELP = ("Write/read /config/users in this ZooKeeper (HOST:PORT[/chroot]) instead of "
                  "through a broker: the brokers' own SCRAM user, before any broker runs "
                  "(kafka-configs --zookeeper).")


def _zookeeper_option() -> Any:
    return typer.Option(None, "--zookeeper", metavar="HOST:PORT[/CHROOT]", help=ZOOKEEPER_HELP)


def _zk_store(zookeeper: str, bootstrap: str | None,
              fn: Callable[[ZkCredentialStore], T]) -> T:
    """Run fn(store) on the cluster's ZooKeeper credential store (loaded first)."""
    from kafkactl.cluster import zookeeper as zkconn
    from kafkactl.cluster.scram_zk_store import ZkCredentialStore

    if bootstrap is not None:
        raise fail("--zookeeper and --bootstrap-server: give one", 2)
    try:
        zk = zkconn.connect(zookeeper, timeout_s=15, what="--zookeeper")
    except zkconn.ZooKeeperUnavailable as e:
        raise fail(str(e)) from None
    try:
        store = ZkCredentialStore(zk)
        store.start(watch=False)  # (the watch fired as the session closed: a warning)
        return fn(store)
    finally:
        zkconn.close(zk)


def _read_password() -> str:
    """The password from the terminal (asked twice, not echoed) or, when stdin is not a
    terminal (`echo secret | kafkactl users add bob`), its first line: getpass would warn
    that it cannot hide the input there."""
    import sys

    if sys.stdin is not None and sys.stdin.isatty():
        while True:  # (click's own confirmation says "Error:", the other messages "error:")
            password = typer.prompt("Password", hide_input=True)
            if typer.prompt("Repeat for confirmation", hide_input=True) == password:
                break
            typer.echo("error: the two entered values do not match", err=True)
    else:
        line = sys.stdin.readline() if sys.stdin is not None else ""
        password = line.removesuffix("\n").removesuffix("\r")
    if not password:
        raise fail("the password is empty: give --password, or the password on stdin", 2)
    return str(password)


def _call(bootstrap: str | None, prop: list[str], command_config: Path | None,
          fn: object) -> object:
    from kafkactl.client.errors import ClientError
    from kafkactl.client.kafka_client import KafkaClient

    client = KafkaClient(bootstrap, client_id="kafkactl-users",
                         security=client_security(prop, command_config))
    try:
        return fn(client)  # type: ignore[operator]
    except ClientError as e:
        raise fail(str(e)) from None
    finally:
        client.close()


@users_app.command("add")
def add(
    name: str = typer.Argument(..., help="The user name (principal User:NAME)."),
    password: str | None = typer.Option(
        None, "--password",
        help="The password (default: prompted for on a terminal, else the first line of "
             "stdin)."),
    mechanism: list[str] = typer.Option([], "--mechanism",
                                        help="SCRAM-SHA-256 and/or SCRAM-SHA-512 (both)."),
    iterations: int = typer.Option(4096, "--iterations", min=4096, max=16384,
                                    help="SCRAM iterations (4096-16384)."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
    zookeeper: str | None = _zookeeper_option(),
) -> None:
    """Add a SCRAM user or change its password."""
    from kafkactl.client.security_admin import alter_user
    from kafkactl.protocol.scram import MECHANISMS as SCRAM
    from kafkactl.protocol.scram import new_credential

    mechs = _mechanisms(mechanism)
    if password is None:
        password = _read_password()
    if zookeeper is not None:
        _zk_store(zookeeper, bootstrap, lambda store: store.alter(
            {(name, m): new_credential(SCRAM[m], password, iterations) for m in mechs}, set()))
    else:
        _call(bootstrap, prop, command_config, lambda c: alter_user(
            c, name, password=password, mechanisms=mechs, iterations=iterations))
    typer.echo(f"User {name}: {', '.join(mechs)} credentials stored.")


@users_app.command("list")
def list_users(
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
    zookeeper: str | None = _zookeeper_option(),
) -> None:
    """List SCRAM users with their mechanisms and iterations."""
    from kafkactl.client.security_admin import describe_users

    users: Any
    if zookeeper is not None:
        users = _zk_store(zookeeper, bootstrap, lambda store: {
            u: [(m, c.iterations) for m, c in sorted(creds.items())]
            for u, creds in store.users().items()})
    else:
        users = _call(bootstrap, prop, command_config, describe_users)
    for user, creds in sorted(users.items()):
        typer.echo(f"{user}\t" + ", ".join(f"{m} (iterations={i})" for m, i in creds))


@users_app.command("delete")
def delete(
    name: str = typer.Argument(...),
    mechanism: list[str] = typer.Option([], "--mechanism",
                                        help="Only this mechanism's credential (default: all)."),
    bootstrap: str | None = bootstrap_option(),
    prop: list[str] = property_option(),
    command_config: Path | None = command_config_option(),
    zookeeper: str | None = _zookeeper_option(),
) -> None:
    """Delete a SCRAM user's credentials (both mechanisms unless --mechanism)."""
    from kafkactl.client.security_admin import alter_user, describe_users

    if zookeeper is not None:
        def drop(store: ZkCredentialStore) -> list[str]:
            have = store.users().get(name, {})
            gone = [m for m in _mechanisms(mechanism) if m in have]
            if not gone:
                raise fail(f"user {name} has no such SCRAM credentials")
            store.alter({}, {(name, m) for m in gone})
            return gone

        gone = _zk_store(zookeeper, bootstrap, drop)
        typer.echo(f"User {name}: {', '.join(gone)} credentials deleted.")
        return

    def run(client: object) -> list[str]:
        have = [m for m, _i in describe_users(client).get(name, [])]  # type: ignore[arg-type]
        mechs = [m for m in _mechanisms(mechanism) if m in have]
        if not mechs:
            raise fail(f"user {name} has no such SCRAM credentials")
        alter_user(client, name, password=None, mechanisms=mechs)  # type: ignore[arg-type]
        return mechs

    mechs = _call(bootstrap, prop, command_config, run)
    typer.echo(f"User {name}: {', '.join(mechs)} credentials deleted.")  # type: ignore[arg-type]


def register(app: typer.Typer) -> None:
    app.add_typer(users_app, name="users")
