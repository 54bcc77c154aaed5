"""ZooKeeper requests that ride out a stall for a bounded time, then say so.

kazoo fails a request in flight when its connection drops (ConnectionLoss: the server did
not answer a ping within two thirds of the session timeout) or the session expired, and
queues a request made while it reconnects until a server answers, which may be never. A
tool that reads and writes many znodes (`offsets migrate`) wants neither a traceback on
the first lost connection nor to hang: each request here is retried across lost
connections and expired sessions (kazoo makes a new session by itself) for up to
`timeout_s` seconds, and then ZooKeeperStalled names the server, the request and the
last error. Only idempotent requests go through it (reads, and a delete that takes an
absent znode as deleted).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from kazoo.client import KazooClient

K = TypeVar("K")

RETRY_DELAY_S = 0.1  # the first pause between tries (kafkactl.cluster.zookeeper's policy)
RETRY_MAX_DELAY_S = 1.0


class ZooKeeperStalled(Exception):  # noqa: N818 - a state of the server, as kazoo's names
    """ZooKeeper did not answer a request within the time allowed."""

    def __init__(self, where: str, what: str, timeout_s: float, cause: str) -> None:
        super().__init__(f"{where} did not answer within {timeout_s:g} s ({what}: {cause})")
        self.where = where
        self.what = what
        self.timeout_s = timeout_s
        self.cause = cause


class PatientZooKeeper:
    """A started KazooClient's reads and deletes, each retried for up to `timeout_s`."""

    def __init__(self, zk: KazooClient, timeout_s: float, where: str = "ZooKeeper") -> None:
        self.zk = zk
        self.timeout_s = timeout_s
        self.where = where
        self._deadline = 0.0

    def get_children(self, path: str) -> list[str] | None:
        """The znode's children; None when it does not exist."""
        from kazoo.exceptions import NoNodeError

        try:
            children: list[str] = self._call(f"listing {path}",
                                             lambda: self.zk.get_children_async(path))
        except NoNodeError:
            return None
        return children

    def get_many(self, paths: dict[K, str], what: str) -> dict[K, bytes]:
        """Each existing znode's data (an absent one is left out), pipelined: every
        request in flight at once, those lost with a connection asked again."""
        from kazoo.exceptions import NoNodeError

        out: dict[K, bytes] = {}
        pending = dict(paths)

        def round_trip() -> None:
            started = [(key, self.zk.get_async(path)) for key, path in pending.items()]
            lost: BaseException | None = None
            for key, op in started:
                try:
                    out[key] = self._wait(op)[0]
                except NoNodeError:
                    pass
                except self._retriable() as e:
                    lost = e
                    continue
                del pending[key]
            if lost is not None:
                raise lost

        self._retry(what, round_trip)
        return out

    def delete(self, path: str) -> None:
        """Delete the znode; one already gone counts as deleted (a retried delete whose
        first answer was lost finds it so)."""
        from kazoo.exceptions import NoNodeError

        with contextlib.suppress(NoNodeError):
            self._call(f"deleting {path}", lambda: self.zk.delete_async(path))

    # ---- the retry loop ----------------------------------------------------------------------

    def _retriable(self) -> tuple[type[BaseException], ...]:
        from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError

        return (ConnectionLoss, SessionExpiredError, OperationTimeoutError)

    def _wait(self, op: Any) -> Any:
        """The async request's answer; the handler's timeout error once the deadline of the
        current call has passed (a request queued while kazoo reconnects waits for a
        server that may never answer)."""
        return op.get(timeout=max(0.0, self._deadline - time.monotonic()))

    def _call(self, what: str, start: Callable[[], Any]) -> Any:
        answer: list[Any] = []
        self._retry(what, lambda: answer.append(self._wait(start())))
        return answer[0]

    def _retry(self, what: str, attempt: Callable[[], None]) -> None:
        self._deadline = time.monotonic() + self.timeout_s
        timeout_error = self.zk.handler.timeout_exception
        delay = RETRY_DELAY_S
        lost = ""  # the last error a try met
        while True:
            try:
                attempt()
                return
            except timeout_error:
                raise ZooKeeperStalled(self.where, what, self.timeout_s,
                                       f"{lost}, then no answer" if lost else "no answer"
                                       ) from None
            except self._retriable() as e:
                lost = type(e).__name__
                left = self._deadline - time.monotonic()
                if left <= 0:
                    raise ZooKeeperStalled(self.where, what, self.timeout_s, lost) from None
                time.sleep(min(left, delay * random.uniform(0.75, 1.25)))
                delay = min(delay * 2, RETRY_MAX_DELAY_S)
