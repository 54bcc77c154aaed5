"""message.format.version as Kafka 3.x's MetadataVersion.fromVersionString reads it."""

from __future__ import annotations

import pytest

from kafkactl.log.message_format_version import message_format_version


@pytest.mark.parametrize("value", ["0.10.0.0", "0.10.0", "0.10.0-IV1", "0.8.2.2", "0.11.0",
                                   "1.0", "2.8", "2.8.1", "3.0-IV1", "3.0", " 0.10.2.1 "])
def test_versions_kafka_accepts(value: str) -> None:
    assert message_format_version(value) == value.strip()


@pytest.mark.parametrize("value", ["0.7.0", "0.10", "4.5", "abc", "", "3", "0.10.3"])
def test_versions_kafka_refuses(value: str) -> None:
    with pytest.raises(ValueError, match="is not a valid version"):
        message_format_version(value)


def test_topic_config_takes_what_kafka_takes() -> None:
    """The topic key too (topics create/alter --config): 0.10.0.0 is taken, nonsense is
    refused naming the key."""
    import pytest as _pytest

    from kafkactl.log.config_def import validate_topic_configs
    from kafkactl.log.errors import ConfigError

    validate_topic_configs({"message.format.version": "0.10.0.0"})
    with _pytest.raises(ConfigError, match="message.format.version"):
        validate_topic_configs({"message.format.version": "banana"})
