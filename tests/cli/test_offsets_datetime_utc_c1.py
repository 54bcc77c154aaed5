"""A date and time without a zone is UTC, whatever the machine's time zone, as Kafka's tools
read it (Utils.getDateTime appends `Z` to a time with no zone): `offsets reset
--to-datetime`, `topics offsets --time` and `consume -o` land on the same offset in every TZ, and an
explicit zone (`Z`, `+05:00`, `+0500`, `+05`) is honoured. The CLI runs as its own process
with TZ set in its environment (not forked from the test's zygote, whose time zone is
read once)."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta
from typing import Any

from tests import zygote

ZONES = ("UTC", "America/New_York", "Asia/Tokyo", "Australia/Adelaide")
HOUR_MS = 3_600_000


def kafkactl(tz: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TZ": tz}
    return subprocess.run([*zygote.KAFKACTL, *args], capture_output=True, text=True,
                          env=env, timeout=120)


def produce_at(bootstrap: str, topic: str, stamps: list[int]) -> None:
    """Records of partition 0 through librdkafka, each with its own CreateTime."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for ts in stamps:
        p.produce(topic, value=f"at {ts}".encode(), partition=0, timestamp=ts)
    assert p.flush(30) == 0


def test_a_time_without_a_zone_is_utc_in_every_time_zone(module_broker: Any) -> None:
    b = module_broker.bootstrap
    r = kafkactl("UTC", "topics", "create", "-t", "tzc1", "--partitions", "1", "-b", b)
    assert r.returncode == 0, r.stderr
    # ten records a minute apart, a day ago (well within retention); a zone's shift of
    # hours puts a time read as local either past them all or before them all
    base = (int(datetime.now(UTC).timestamp() * 1000) // HOUR_MS - 24) * HOUR_MS
    produce_at(b, "tzc1", [base + i * 60_000 for i in range(10)])
    at3 = datetime.fromtimestamp((base + 3 * 60_000) / 1000, UTC)
    naive = at3.strftime("%Y-%m-%dT%H:%M:%S.000")  # the record at offset 3, in UTC
    plus5 = (at3 + timedelta(hours=5)).strftime("%Y-%m-%dT%H:%M:%S.000")

    for tz in ZONES:
        for when in (naive, naive + "Z", plus5 + "+05:00", plus5 + "+0500", plus5 + "+05"):
            r = kafkactl(tz, "offsets", "reset", "-b", b, "-G", "tzc1-g", "--topic", "tzc1",
                         "--to-datetime", when, "--export")
            assert r.returncode == 0, (tz, when, r.stderr)
            assert r.stdout.splitlines() == ["tzc1,0,3"], (tz, when, r.stdout)
            r = kafkactl(tz, "topics", "offsets", "-b", b, "-t", "tzc1", "-p", "0",
                         "--time", when)
            assert r.returncode == 0, (tz, when, r.stderr)
            assert r.stdout == "tzc1:0:3\n", (tz, when, r.stdout)
            r = kafkactl(tz, "consume", "-b", b, "-t", "tzc1", "-o", when, "-e", "-f", "%o\\n")
            assert r.returncode == 0, (tz, when, r.stderr)
            assert r.stdout.split() == [str(o) for o in range(3, 10)], (tz, when, r.stdout)

    # --execute commits the same offset a New York machine and a Tokyo one would
    for tz, group in (("America/New_York", "tzc1-ny"), ("Asia/Tokyo", "tzc1-tk")):
        r = kafkactl(tz, "offsets", "reset", "-b", b, "-G", group, "--topic", "tzc1",
                     "--to-datetime", naive, "--execute", "--export")
        assert r.returncode == 0 and r.stdout.splitlines() == ["tzc1,0,3"], (tz, r)

    # a bad one says what is expected, and that a time without a zone is UTC
    r = kafkactl("Asia/Tokyo", "offsets", "reset", "-b", b, "-G", "tzc1-g", "--topic",
                 "tzc1", "--to-datetime", "yesterday noon")
    assert r.returncode == 2 and "bad --to-datetime 'yesterday noon'" in r.stderr, r.stderr
    assert "UTC without a zone" in r.stderr, r.stderr
    r = kafkactl("Asia/Tokyo", "topics", "offsets", "-b", b, "-t", "tzc1", "--time", "noon")
    assert r.returncode == 2 and "UTC without a zone" in r.stderr, r.stderr


def test_the_help_says_a_time_without_a_zone_is_utc() -> None:
    for args in (["offsets", "reset", "--help"], ["topics", "offsets", "--help"],
                 ["consume", "--help"]):
        r = zygote.run([*args], text=True, timeout=60, env={**os.environ, "COLUMNS": "300"})
        assert r.returncode == 0, r.stderr
        assert "UTC" in r.stdout and "without a zone" in r.stdout, (args, r.stdout)
