"""The ZooKeeper connection (kazoo): `zookeeper.connect` strings with a chroot, a clear error
when the ensemble cannot be reached, and JSON znode helpers that never crash on bad data."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("kafkactl.zookeeper")


class ZooKeeperUnavailable(Exception):
    """ZooKeeper could not be reached (the message names the connect string)."""


def split_connect(connect: str) -> tuple[str, str]:
    """'h1:2181,h2:2181/kafka' -> ('h1:2181,h2:2181', '/kafka'); no chroot -> ''."""
    connect = connect.strip()
    if not connect:
        raise ValueError("zookeeper.connect is empty")
    hosts, slash, chroot = connect.partition("/")
    if not hosts:
        raise ValueError(f"zookeeper.connect={connect!r} names no host")
    chroot = ("/" + chroot.rstrip("/")) if slash and chroot.strip("/") else ""
    return hosts, chroot


def connect(connect_string: str, *, timeout_s: float = 18.0,
            session_timeout_s: float = 18.0, create_chroot: bool = True,
            what: str = "zookeeper.connect") -> KazooClient:
    """A started KazooClient rooted at the connect string's chroot (created when missing,
    as Kafka does). Raises ZooKeeperUnavailable after `timeout_s` without a session, naming
    the connect string and `what` it came from (a config key or a flag)."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    _quiet_kazoo()

    hosts, chroot = split_connect(connect_string)

    def started(where: str) -> KazooClient:
        zk = KazooClient(hosts=where, timeout=session_timeout_s)
        try:
            zk.start(timeout=timeout_s)
        except KazooTimeoutError:
            zk.close()
            raise ZooKeeperUnavailable(
                f"cannot reach ZooKeeper at {connect_string} ({what}) within "
                f"{timeout_s:g} s") from None
        return zk

    if chroot and create_chroot:
        root = started(hosts)
        try:
            root.ensure_path(chroot)
        finally:
            close(root)
    return started(hosts + chroot)


def _quiet_kazoo() -> None:
    """In a command-line tool (no logging configured), kazoo's retry chatter would go to
    stderr through logging's last-resort handler; our own error says what failed. A broker
    (logging configured) keeps kazoo's lines in its log."""
    if not logging.getLogger().handlers:
        kazoo_log = logging.getLogger("kazoo")
        if not kazoo_log.handlers:
            kazoo_log.addHandler(logging.NullHandler())
            kazoo_log.propagate = False


def close(zk: KazooClient) -> None:
    try:
        zk.stop()
    finally:
        zk.close()


def decode_json(data: bytes | None, path: str) -> Any:
    """A znode's JSON value, or None (logged) when it is empty or malformed."""
    if not data:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        log.warning("ignoring malformed JSON in znode %s: %s", path, e)
        return None


def read_json(zk: KazooClient, path: str) -> Any:
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    return decode_json(data, path)


K = TypeVar("K")


def get_all(zk: KazooClient, paths: dict[K, str]) -> dict[K, tuple[bytes, Any] | None]:
    """Each znode's (data, stat), None when absent: read pipelined, every request in
    flight at once, one round trip in all."""
    from kazoo.exceptions import NoNodeError

    pending = [(key, zk.get_async(path)) for key, path in paths.items()]
    out: dict[K, tuple[bytes, Any] | None] = {}
    for key, op in pending:
        try:
            out[key] = op.get()
        except NoNodeError:
            out[key] = None
    return out


def encode_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def sequence_number(child: str) -> int:
    """The counter ZooKeeper appended to a sequential znode's name (`acl_changes_0000000042`
    -> 42); -1 for a name without one."""
    digits = child.rsplit("_", 1)[-1]
    return int(digits) if digits.isdigit() else -1
