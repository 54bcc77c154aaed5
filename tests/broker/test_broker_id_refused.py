"""A negative broker id is refused at start-up with one clear line (it used to run as
broker 0): -1 is Kafka's "generate an id", which kafkactl does not do, and says so. Left
unset, the id is 0 as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkactl.broker.config import BrokerConfig, ConfigError
from tests import zygote
from tests.conftest import free_port


@pytest.mark.parametrize(("args", "said"), [
    (["--broker-id", "-5"], "broker.id=-5 is negative"),
    (["-o", "broker.id=-7"], "broker.id=-7 is negative"),
    (["--broker-id", "-1"], "broker.id=-1 asks for a generated broker id, which kafkactl "
                            "does not do"),
])
def test_negative_broker_ids_are_refused(tmp_path: Path, args: list[str], said: str) -> None:
    data = tmp_path / "data"
    r = zygote.run(["serve", "-d", str(data), "-l", f"127.0.0.1:{free_port()}", *args],
                   text=True, timeout=60)
    assert r.returncode == 2
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and said in lines[0], r.stderr
    assert not data.exists()  # refused before anything was made


def test_the_broker_id_from_a_config_file_is_checked_too(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("broker.id=-1\n")
    with pytest.raises(ConfigError, match="generated broker id"):
        BrokerConfig.build(config_file=props)
    assert BrokerConfig.build().broker_id == 0  # unset: 0, as before
    assert BrokerConfig.build(flags={"broker.id": "3"}).broker_id == 3
