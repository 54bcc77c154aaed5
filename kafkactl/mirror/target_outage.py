"""TargetOutage: the mirror's view of whether its target cluster is reachable.

Its producer retries quietly while the target is down (for delivery.timeout.ms); this says
so as it happens (a warning when connections start failing, reminders, one when it is
back: the producer's OutageNotices), and lets a stop not wait for a target that does not
answer: what is still in flight is then not delivered, its source offsets are not
committed, and the next run copies it (nothing is lost; SIGTERM no longer waits out the
flush and close timeouts, 40 s and more, to end with a misleading refusal).
"""

from __future__ import annotations

import logging
import time

from kafkactl.client.errors import KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable
from kafkactl.client.outage import OutageNotices
from kafkactl.client.producer import Producer

log = logging.getLogger("kafkactl.mirror")

UNREACHABLE = (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable)
SLICE_S = 0.25  # a stop's flush looks at the target's state this often


class TargetOutage:
    def __init__(self, producer: Producer, label: str = "target") -> None:
        self.notices = OutageNotices(producer, self._say, prefix=label)

    @staticmethod
    def _say(line: str) -> None:
        log.warning("%s", line)

    def failed(self, error: BaseException) -> bool:
        """A request of the caller's own (a transaction's) failed with `error`: True, and
        counted as the outage, when it is one of not reaching the target."""
        if not isinstance(error, UNREACHABLE):
            return False
        self.notices.on_connection_error(-1, error)
        return True

    def reached(self) -> None:
        """A request of the caller's own got through: the outage, if any, is over."""
        self.notices.recovered()

    def unreachable(self) -> bool:
        """Connections to the target are failing (since no retried batch got through)."""
        return self.notices.down_since is not None

    def where(self) -> str:
        return self.notices.where or "the target"


def settle(producer: Producer, timeout: float, outage: TargetOutage | None) -> bool:
    """Flush `producer` for up to `timeout` s, but no longer once the target is
    unreachable: True when every record sent has its answer."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if producer.flush(max(0.0, min(SLICE_S, remaining))):
            return True
        if remaining <= SLICE_S or (outage is not None and outage.unreachable()):
            return False
