"""/ready's reason for a cluster broker that is not caught up (metrics_http.behind_reason),
on the metadata and log dirs it is given: followed partitions out of the ISR are "catching
up"; a replica this broker could not make (its log dir offline since the start, or failing
with storage errors when the replica came, found by a tester: it said "offline since the
start (?)") is named as such, with the dir."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kafkactl.broker.metrics_http import behind_reason

ME = 2


def _services(partitions: dict[int, dict[str, Any]], offline_tps: set[tuple[str, int]],
              at_start: set[Path], failing: set[Path], went: frozenset[Path] = frozenset()
              ) -> Any:
    topic = SimpleNamespace(partitions={
        p: SimpleNamespace(partition=p, replicas=[1, ME], leader=1, isr=meta["isr"],
                           offline_replicas=meta.get("offline", []))
        for p, meta in partitions.items()})
    cache = SimpleNamespace(updated=True, topic_names=lambda: ["h"], topic=lambda _n: topic)
    log_manager = SimpleNamespace(offline={d: "why" for d in at_start | went},
                                  went_offline=set(went),
                                  offline_dirs=lambda: failing | at_start | went)
    return SimpleNamespace(metadata_cache=cache, broker_id=ME,
                           partitions=SimpleNamespace(offline=offline_tps),
                           log_manager=log_manager)


def test_in_sync_is_ready() -> None:
    assert behind_reason(_services({0: {"isr": [1, ME]}}, set(), set(), set())) is None


def test_out_of_the_isr_is_catching_up() -> None:
    said = behind_reason(_services({0: {"isr": [1]}, 1: {"isr": [1, ME]}}, set(), set(),
                                   set()))
    assert said == "catching up: 1 followed partition(s) not in the ISR yet (h-0)"


def test_a_replica_refused_while_the_dir_had_storage_errors() -> None:
    said = behind_reason(_services({0: {"isr": [1]}, 1: {"isr": [1], "offline": [ME]}},
                                   {("h", 0)}, set(), {Path("/d2")}))
    assert said == ("log dir(s) with storage errors (/d2): 2 replica(s) there cannot rejoin "
                    "their ISR until the broker restarts with the dir repaired (h-0, h-1)")


def test_offline_since_the_start_and_failing() -> None:
    said = behind_reason(_services({0: {"isr": [1]}}, {("h", 0)}, {Path("/a")},
                                   {Path("/b")}))
    assert said is not None and said.startswith(
        "log dir(s) offline since the start (/a) and with storage errors (/b): 1 replica(s)")


def test_offline_since_the_start_after_a_storage_error_and_failing() -> None:
    said = behind_reason(_services({0: {"isr": [1]}}, {("h", 0)}, {Path("/a")},
                                   {Path("/b")}, frozenset({Path("/c")})))
    assert said is not None and said.startswith(
        "log dir(s) offline since the start (/a) and offline after a storage error (/c) and "
        "with storage errors (/b): 1 replica(s)")


def test_catching_up_comes_first() -> None:
    said = behind_reason(_services({0: {"isr": [1]}, 1: {"isr": [1]}}, {("h", 1)}, set(),
                                   {Path("/d2")}))
    assert said == "catching up: 1 followed partition(s) not in the ISR yet (h-0)"
