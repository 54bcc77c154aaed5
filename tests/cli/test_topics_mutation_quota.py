"""`kafkactl topics create` under a controller_mutation_rate quota (KIP-599): the broker
refuses a topic with THROTTLING_QUOTA_EXCEEDED while the quota's bucket is empty; the admin
client asks for it again after the throttle time the broker gives, as Java's admin client
does (retryOnQuotaViolation, on by default), so the command succeeds, later. Before, it
failed with THROTTLING_QUOTA_EXCEEDED. Real broker, real CLI."""

from __future__ import annotations

from tests import zygote
from tests.conftest import BrokerProcess


def test_topics_create_waits_out_the_mutation_quota(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    r = zygote.run(["quotas", "add", "--client-id", "kafkactl-admin", "-c",
                    "controller_mutation_rate=10", "-b", b], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # a bucket of 10 x 11 = 110 partitions: the first two topics empty it (the second one
    # takes it below zero: a strict quota lets the request that empties it through), the
    # third is refused until the throttle time has refilled it
    for name in ("q-1", "q-2", "q-3"):
        r = zygote.run(["topics", "create", "-t", name, "--partitions", "60", "-b", b],
                       text=True, timeout=120)
        assert r.returncode == 0, (name, r.stdout + r.stderr)
    r = zygote.run(["topics", "describe", "-t", "q-3", "--json", "-b", b], text=True,
                   timeout=60)
    assert r.returncode == 0 and '"q-3"' in r.stdout, r.stderr
