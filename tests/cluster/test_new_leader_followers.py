"""A new leader ends the fetches its in-sync followers have parked on it (for other
partitions), so each fetches the new partition at once instead of after
replica.fetch.wait.max.ms; it stops once each has fetched."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kafkactl.broker import replica_state
from kafkactl.broker.partition import FollowerState
from kafkactl.broker.purgatory import FetchPurgatory


def _led(replicas: list[int], followers: dict[int, FollowerState] | None = None
         ) -> SimpleNamespace:
    return SimpleNamespace(is_leader=True, local_id=1, isr=list(replicas),
                           replicas=list(replicas), followers=followers or {})


def test_parked_follower_fetches_end_until_the_follower_has_fetched() -> None:
    async def run() -> None:
        new = _led([1, 2], {2: FollowerState(-1)})  # broker 2 has not fetched it yet
        partitions = {("t", 0): new, ("t", 1): _led([1, 2]), ("u", 0): _led([1, 3])}
        purgatory = FetchPurgatory()
        states = replica_state.ReplicaStates(
            1, SimpleNamespace(partitions=partitions),  # type: ignore[arg-type]
            SimpleNamespace(), purgatory)  # type: ignore[arg-type]
        by_2 = purgatory.watch([("t", 1)], min_bytes=1, accumulated=0, replica=True)
        by_3 = purgatory.watch([("u", 0)], min_bytes=1, accumulated=0, replica=True)
        task = asyncio.create_task(states._hurry_followers([new]))  # type: ignore[list-item]
        await asyncio.sleep(0.005)
        assert by_2.future.done()  # broker 2 fetches again now, with t-0
        assert not by_3.future.done()  # broker 3 has nothing to fetch from t-0
        again = purgatory.watch([("t", 1)], min_bytes=1, accumulated=0, replica=True)
        await asyncio.sleep(replica_state.FIRST_FETCH_POLL_S * 2)
        assert again.future.done()  # still not heard from: woken again
        new.followers[2].log_end_offset = 0  # its first fetch of t-0
        await asyncio.wait_for(task, 10)  # ends at its next poll; the bound is only a guard
        last = purgatory.watch([("t", 1)], min_bytes=1, accumulated=0, replica=True)
        await asyncio.sleep(replica_state.FIRST_FETCH_POLL_S * 2)
        assert not last.future.done()  # long polls are left alone again
        purgatory.shutdown()

    asyncio.run(run())
