"""Two `kafkactl consume -G` with the same group.instance.id: the one that joined later
takes over the static membership, and the first stops with a sentence saying so and what
to do (not just "FENCED_INSTANCE_ID")."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.groups.helpers import create_topic, wait_until
from tests.groups.rejoin_helpers import BROKER, holds, member


def test_a_member_fenced_by_its_instance_id_says_another_member_took_over(
        broker_factory: Any, tmp_path: Path) -> None:
    b = broker_factory(**BROKER)
    create_topic(b.bootstrap, "fz", 1)
    static = ["-X", "group.instance.id=worker-1", "-X", "session.timeout.ms=6000",
              "-X", "heartbeat.interval.ms=500"]
    first = member(b.bootstrap, "fen", "fz", "a", *static,
                   stdout=(tmp_path / "a.out").open("wb"))
    second: subprocess.Popen[bytes] | None = None
    try:
        wait_until(lambda: holds(b.bootstrap, "fen", "a"), 60, "the first member joining")
        second = member(b.bootstrap, "fen", "fz", "b", *static,
                        stdout=(tmp_path / "b.out").open("wb"))
        rc = first.wait(60)
        err = first.communicate()[1].decode()
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate()
    assert rc == 1, err
    assert "another member with the same group.instance.id 'worker-1'" in err, err
    assert "each instance of a group needs its own group.instance.id" in err, err
    assert "Traceback" not in err, err
