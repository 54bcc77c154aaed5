"""`kafkactl mirror`'s options are checked before it starts, and its messages name its own
options: a bad property value or an unwritable --json-status is exit 2 up front, not a
mirror that starts and then fails (or runs on without its status); an unreachable or
mistyped --source-zookeeper is named as such, without a Python warning; a cluster that
stops answering is not advised about -b/--bootstrap-server, which mirror does not take;
and each --num-streams worker has a client.id of its own (MirrorMaker's GROUP-0, -1, ...)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.group import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.mirror.workers import stream_properties
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture
from tests.conftest import BrokerProcess, free_port
from tests.mirror.helpers import FAST, create_topics, mirrored, produce, run_mirror, start_mirror
from tests.polling import wait_until


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A source and a target that answer: what is refused is refused before connecting,
    not because nothing was there."""
    brokers = [BrokerProcess(tmp_path_factory.mktemp(name), free_port())
               for name in ("source", "target")]
    try:
        for b in brokers:
            b.start()
        yield brokers[0].bootstrap, brokers[1].bootstrap
    finally:
        for b in brokers:
            b.kill()


def _refused(clusters: tuple[str, str], *args: str) -> str:
    source, target = clusters
    r = run_mirror("--source", source, "--target", target, "--whitelist", "x", "-q", *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1, r.stderr  # one line, the error, and nothing started
    assert "mirrored" not in r.stderr, r.stderr
    return r.stderr


def test_bad_property_values_are_refused_up_front(clusters: tuple[str, str]) -> None:
    err = _refused(clusters, "--consumer-property", "isolation.level=bogus")
    assert "isolation.level must be read_committed or read_uncommitted (got 'bogus')" in err
    err = _refused(clusters, "--consumer-property", "auto.offset.reset=bogus")
    assert "auto.offset.reset must be earliest, latest or none (got 'bogus')" in err
    err = _refused(clusters, "--producer-property", "compression.type=foo")
    assert "compression.type" in err and "none, gzip, snappy, lz4, zstd" in err, err


def test_an_unwritable_json_status_is_refused_up_front(clusters: tuple[str, str],
                                                       tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "status.json"
    err = _refused(clusters, "--json-status", str(missing))
    assert f"--json-status {missing}: cannot write in {missing.parent}" in err, err
    err = _refused(clusters, "--json-status", str(tmp_path))
    assert f"--json-status {tmp_path} is a directory" in err, err
    assert list(tmp_path.iterdir()) == []  # the check leaves nothing behind


def test_an_unreachable_source_zookeeper_is_named(clusters: tuple[str, str]) -> None:
    connect = f"127.0.0.1:{free_port()}"  # nothing listens there
    r = run_mirror("--source-zookeeper", connect, "--target", clusters[1], "--whitelist", "x",
                   timeout=120)
    assert r.returncode == 1, r.stderr
    assert f"cannot reach ZooKeeper at {connect} (--source-zookeeper)" in r.stderr, r.stderr
    assert "--zookeeper)" not in r.stderr


def test_a_missing_source_zookeeper_chroot_is_an_error_without_a_python_warning(
        clusters: tuple[str, str], zookeeper: Any) -> None:  # noqa: F811 - the fixture
    connect = f"127.0.0.1:{zookeeper.port}/no-such-chroot"
    r = run_mirror("--source-zookeeper", connect, "--target", clusters[1], "--whitelist", "x",
                   timeout=120)
    assert r.returncode == 1, r.stderr
    assert "Warning" not in r.stderr and "warnings.warn" not in r.stderr, r.stderr
    assert (f"has no chroot /no-such-chroot (--source-zookeeper {connect}): is the path "
            "mistyped?") in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr


def test_a_source_that_stops_answering_is_not_advised_about_bootstrap_server(
        broker_factory: Any, tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"adv": 1})
    produce(source.bootstrap, "adv", 0, 10)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--whitelist", "adv")
    wait_until(lambda: mirrored(m, 10), 60, f"10 records mirrored:\n{m.log()}")
    source.kill()
    wait_until(lambda: f"no broker answered at {source.bootstrap}" in m.log(), 60,
               f"a warning about the source:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    log = m.log()
    assert "-b/--bootstrap-server" not in log and "KAFKACTL_BOOTSTRAP" not in log, log
    assert "Check --source and --target" in log, log


def test_each_worker_has_a_client_id_of_its_own(broker_factory: Any, tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"ids": 2})
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--whitelist", "ids",
                     "--num-streams", "2", "-G", "ids-group")

    def client_ids() -> list[str] | None:
        client = KafkaClient(source.bootstrap)
        try:
            group = GroupAdmin(client).describe_group("ids-group")
        finally:
            client.close()
        if group.state != "Stable" or len(group.members) != 2:
            return None
        return sorted(member.client_id for member in group.members)

    ids = wait_until(client_ids, 60, f"both workers in the group:\n{m.log()}")
    assert ids == ["kafkactl-mirror-0", "kafkactl-mirror-1"]
    assert m.terminate() == 0, m.log()
    # a client.id given is suffixed the same way (as group.instance.id is)
    assert stream_properties({"client.id": "dc1"}, 1) == {"client.id": "dc1-1"}
