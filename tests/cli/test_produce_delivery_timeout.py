"""`-X delivery.timeout.ms` below linger.ms + request.timeout.ms is refused as Java's
KafkaProducer refuses it when set (a record could expire before its request was answered);
at the sum it is taken. Checked before any broker is asked (-b: a closed port)."""

from __future__ import annotations

import pytest

from tests import zygote


@pytest.mark.parametrize("delivery, ok", [(3004, False), (3005, True), (3006, True)])
def test_delivery_timeout_at_the_edge(delivery: int, ok: bool) -> None:
    r = zygote.run(["produce", "-t", "t", "-b", "127.0.0.1:9", "--linger-ms", "5",
                    "-X", f"delivery.timeout.ms={delivery}", "-X", "request.timeout.ms=3000"],
                   input="v\n", text=True, timeout=60)
    if ok:
        assert r.returncode == 1 and "no broker answered" in r.stderr, r.stderr
    else:
        assert r.returncode == 2, r.stderr
        assert (f"-X delivery.timeout.ms={delivery}: delivery.timeout.ms should be equal to "
                "or larger than linger.ms + request.timeout.ms (3005)") in r.stderr
