"""`consume -t NAME` with a name Kafka does not allow is refused before anything is sent,
in the words `produce` uses (one check, kafkactl.cli._topic_name), exit status 2; it
printed the broker's `error: topic 'bad topic!': INVALID_TOPIC_EXCEPTION` (exit 1), with
-G too."""

from __future__ import annotations

import pytest

from tests import zygote
from tests.conftest import BrokerProcess

RULE = "; a topic name is letters, digits, '.', '_' and '-' (at most 249)"
NAMES = {
    "bad topic!": "the name has characters a topic name may not have: ' ' '!'",
    "x" * 300: "the name is 300 characters long, more than 249",
    "..": "the name may not be '..'",
}


@pytest.mark.parametrize("name", list(NAMES), ids=["characters", "300-long", "dots"])
@pytest.mark.parametrize("extra", [[], ["-G", "topic-name-group"],
                                   ["-t", "fine-topic"]], ids=["plain", "group", "two"])
def test_consume_refuses_a_topic_name_kafka_does_not_allow(
        module_broker: BrokerProcess, name: str, extra: list[str]) -> None:
    r = zygote.run(["consume", "-b", module_broker.bootstrap, *extra, "-t", name, "-e"],
                   text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr == f"error: -t/--topic '{name}': {NAMES[name]}{RULE}\n", r.stderr
    assert r.stdout == ""


def test_produce_and_consume_say_the_same(module_broker: BrokerProcess) -> None:
    """One check for both commands: the same line, the same exit status."""
    args = ["-b", module_broker.bootstrap, "-t", "bad topic!"]
    consumed = zygote.run(["consume", *args, "-e"], text=True, timeout=60)
    produced = zygote.run(["produce", *args], input="v\n", text=True, timeout=60)
    assert (consumed.returncode, consumed.stderr) == (produced.returncode, produced.stderr)
    assert produced.returncode == 2


def test_a_name_kafka_allows_is_read(module_broker: BrokerProcess) -> None:
    """Letters, digits, '.', '_' and '-' (and 249 of them) pass the check."""
    name = "Ok_topic.name-9" + "z" * (249 - 15)
    assert zygote.run(["topics", "create", "-b", module_broker.bootstrap, "-t", name],
                      text=True, timeout=60).returncode == 0
    assert zygote.run(["produce", "-b", module_broker.bootstrap, "-t", name],
                      input="v\n", text=True, timeout=60).returncode == 0
    r = zygote.run(["consume", "-b", module_broker.bootstrap, "-t", name, "-e",
                    "--from-beginning"], text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, "v\n"), r.stderr


@pytest.mark.parametrize("args", [
    ["offsets", "reset", "-G", "g", "--to-earliest", "-t"],
    ["offsets", "reset", "-G", "g", "--to-earliest", "-t", "fine-topic", "-t"],
    ["offsets", "delete", "-G", "g", "-t"],
    ["delete-records", "--before", "end", "-t"],
], ids=["offsets-reset", "offsets-reset-two", "offsets-delete", "delete-records"])
def test_other_commands_taking_a_topic_say_the_same(module_broker: BrokerProcess,
                                                    args: list[str]) -> None:
    # they printed the broker's INVALID_TOPIC_EXCEPTION (exit 1)
    r = zygote.run([*args, "bad topic!", "-b", module_broker.bootstrap], text=True,
                   timeout=60)
    assert (r.returncode, r.stderr) == (
        2, f"error: --topic 'bad topic!': {NAMES['bad topic!']}{RULE}\n"), r.stderr
