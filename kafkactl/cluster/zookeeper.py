"""The ZooKeeper connection (kazoo): `zookeeper.connect` strings with a chroot, a clear error
when the ensemble cannot be reached, and JSON znode helpers that never crash on bad data."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry

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


# Reconnecting (and kazoo's own retried commands): about once a second, as Kafka's ZooKeeper
# client does, never longer. kazoo's default doubles the wait up to an hour: after a 97 s
# outage brokers came back 31-70 s after ZooKeeper did, and one kept acting as the
# controller meanwhile although another had been elected.
RETRY_DELAY_S = 0.1  # the first wait
RETRY_MAX_DELAY_S = 1.0  # the longest wait, before jitter
RETRY_JITTER = 0.25  # each wait is the delay times 1 +- this, so clients do not retry in step

# ZooKeeper refuses a request larger than its jute.maxbuffer (1 MiB - 1 by default) by
# dropping the connection (the client sees ConnectionLoss, and retrying gets the same):
# what one write request carries (paths and data of every op) is checked against this
# first, with room for the request's headers and ACLs.
JUTE_MAXBUFFER = 0xFFFFF
WRITE_MAX_BYTES = JUTE_MAXBUFFER - 4096


class ZnodeTooLargeError(ValueError):
    """A write ZooKeeper would refuse (larger than its jute.maxbuffer): never sent."""

    def __init__(self, what: str, size: int) -> None:
        super().__init__(f"{what} is {size:,} bytes; ZooKeeper takes at most "
                         f"{WRITE_MAX_BYTES:,} in one request (jute.maxbuffer)")
        self.what = what
        self.size = size


def check_write_size(what: str, ops: Iterable[tuple[str, bytes]]) -> None:
    """Raise ZnodeTooLargeError when the (path, data) ops of one request are too large."""
    size = sum(len(path) + len(data) for path, data in ops)
    if size > WRITE_MAX_BYTES:
        raise ZnodeTooLargeError(what, size)


def retry_policy() -> KazooRetry:
    """kazoo's retry policy for reconnecting and for its retried commands: forever, every
    RETRY_MAX_DELAY_S at most (with jitter)."""
    from kazoo.retry import KazooRetry

    return KazooRetry(max_tries=-1, delay=RETRY_DELAY_S, backoff=2,
                      max_jitter=RETRY_JITTER, max_delay=RETRY_MAX_DELAY_S)


def connect(connect_string: str, *, timeout_s: float = 18.0,
            session_timeout_s: float = 18.0, create_chroot: bool = True,
            what: str = "zookeeper.connect") -> KazooClient:
    """A started KazooClient rooted at the connect string's chroot (created when missing,
    as Kafka does, unless `create_chroot` is False: see `ensure_chroot`). Raises
    ZooKeeperUnavailable after `timeout_s` without a session, naming the connect string
    and `what` it came from (a config key or a flag)."""
    _quiet_kazoo()
    hosts, chroot = split_connect(connect_string)
    if chroot and create_chroot:
        ensure_chroot(connect_string, timeout_s=timeout_s,
                      session_timeout_s=session_timeout_s, what=what)
    return _started(hosts + chroot, connect_string, timeout_s, session_timeout_s, what)


def ensure_chroot(connect_string: str, *, timeout_s: float = 18.0,
                  session_timeout_s: float = 18.0, what: str = "zookeeper.connect") -> None:
    """Create the connect string's chroot (and its parents) when missing."""
    _quiet_kazoo()
    hosts, chroot = split_connect(connect_string)
    if not chroot:
        return
    root = _started(hosts, connect_string, timeout_s, session_timeout_s, what)
    try:
        root.ensure_path(chroot)
    finally:
        close(root)


def _started(where: str, connect_string: str, timeout_s: float, session_timeout_s: float,
             what: str) -> KazooClient:
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    zk = KazooClient(hosts=where, timeout=session_timeout_s,
                     connection_retry=retry_policy(), command_retry=retry_policy())
    try:
        zk.start(timeout=timeout_s)
    except KazooTimeoutError:
        zk.close()
        raise ZooKeeperUnavailable(
            f"cannot reach ZooKeeper at {connect_string} ({what}) within "
            f"{timeout_s:g} s") from None
    return zk


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
