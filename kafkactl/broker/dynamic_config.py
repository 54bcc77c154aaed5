"""Dynamic broker configs (KIP-226): the broker keys that AlterConfigs and
IncrementalAlterConfigs may change without a restart, per broker (resource name = the
broker id) and cluster-wide (resource name ""), persisted in the data dir.

Precedence, highest first: DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
STATIC_BROKER_CONFIG (server.properties / --override), DEFAULT_CONFIG. The dynamic keys are
those this broker honours at run time: the `log.*` defaults of topic configs (retention,
segments, flush, cleaner, cleanup policy, timestamps, preallocate), `message.max.bytes`,
`compression.type`, `min.insync.replicas` and `unclean.leader.election.enable`. Any other
key is refused naming it, as Kafka refuses a read-only one. A change re-applies the topic
defaults to every open log whose topic does not override the key.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafkactl.broker.config import BROKER_DEFAULTS, BrokerConfig
from kafkactl.broker.partition_store import PartitionStore
from kafkactl.log.config import BROKER_SYNONYMS, LogConfig
from kafkactl.log.config_def import TOPIC_CONFIGS
from kafkactl.log.errors import ConfigError

log = logging.getLogger(__name__)

DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
FILE_NAME = "dynamic-broker-configs.json"

# broker key -> the topic key it is the default for
_TOPIC_KEY_OF: dict[str, str] = {bk: tk for tk, syns in BROKER_SYNONYMS.items()
                                 for bk, _scale in syns}
_TOPIC_KEY_OF.update({"min.insync.replicas": "min.insync.replicas",
                      "unclean.leader.election.enable": "unclean.leader.election.enable"})
# As in Kafka, only each topic key's preferred broker synonym is dynamic (log.retention.ms,
# log.roll.ms; not log.retention.hours or log.flush.scheduler.interval.ms).
DYNAMIC_KEYS = frozenset({syns[0][0] for syns in BROKER_SYNONYMS.values()}
                         | {"min.insync.replicas", "unclean.leader.election.enable"})


def synonyms_of(key: str) -> list[str]:
    """The broker keys that set the same thing, in Kafka's order (finest unit first)."""
    topic_key = _TOPIC_KEY_OF.get(key)
    if topic_key is None or topic_key not in BROKER_SYNONYMS:
        return [key]
    return [bk for bk, _scale in BROKER_SYNONYMS[topic_key]]


class DynamicBrokerConfig:
    """The two dynamic layers over the static `config` (whose explicitly set keys are
    `explicit_keys`); changes reach the logs hosted in `partitions`."""

    def __init__(self, config: BrokerConfig, explicit_keys: set[str], path: Path,
                 partitions: PartitionStore) -> None:
        self.config = config
        self.explicit_keys = explicit_keys
        self.partitions = partitions
        self.path = path
        self.static: dict[str, str] = dict(config.props)
        self.default: dict[str, str] = {}
        self.broker: dict[str, str] = {}

    @property
    def broker_id(self) -> str:
        return str(self.config.broker_id)

    # ---- persistence -----------------------------------------------------------------------
    def load(self) -> None:
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
            self.default = {str(k): str(v) for k, v in data.get("default", {}).items()}
            self.broker = {str(k): str(v)
                           for k, v in data.get("brokers", {}).get(self.broker_id, {}).items()}
        except (OSError, ValueError, AttributeError) as e:
            raise ConfigError(f"{self.path} is unreadable ({e}); fix or move it away to "
                              "start with the static broker configs only") from e
        self.apply()
        if self.default or self.broker:
            log.info("dynamic broker configs from %s: %s", self.path,
                     {**self.default, **self.broker})

    def _persist(self) -> None:
        brokers: dict[str, dict[str, str]] = {}
        if self.path.exists():
            try:
                brokers = dict(json.loads(self.path.read_text()).get("brokers", {}))
            except (OSError, ValueError, AttributeError):
                brokers = {}
        brokers[self.broker_id] = dict(self.broker)
        data = {"version": 1, "default": self.default, "brokers": brokers}
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    # ---- queries ---------------------------------------------------------------------------
    def layer(self, resource_name: str) -> dict[str, str]:
        if resource_name == "":
            return self.default
        if resource_name == self.broker_id:
            return self.broker
        raise ConfigError(f"this is broker {self.broker_id}, not {resource_name!r}")

    def effective(self, default: Mapping[str, str] | None = None,
                  broker: Mapping[str, str] | None = None) -> dict[str, str]:
        props = dict(self.static)
        props.update(self.default if default is None else default)
        props.update(self.broker if broker is None else broker)
        return props

    def source_of(self, key: str) -> int:
        if key in self.broker:
            return DYNAMIC_BROKER_CONFIG
        if key in self.default:
            return DYNAMIC_DEFAULT_BROKER_CONFIG
        if key in self.explicit_keys:
            return STATIC_BROKER_CONFIG
        return DEFAULT_CONFIG

    def synonyms(self, key: str) -> list[dict[str, Any]]:
        """DescribeConfigs synonyms of a broker key: each layer that sets it or a synonym."""
        out: list[dict[str, Any]] = []
        names = synonyms_of(key)
        for layer, source in ((self.broker, DYNAMIC_BROKER_CONFIG),
                              (self.default, DYNAMIC_DEFAULT_BROKER_CONFIG)):
            out += [{"name": n, "value": layer[n], "source": source} for n in names
                    if n in layer]
        out += [{"name": n, "value": self.static[n], "source": STATIC_BROKER_CONFIG}
                for n in names if n in self.explicit_keys and n in self.static]
        out += [{"name": n, "value": BROKER_DEFAULTS[n], "source": DEFAULT_CONFIG}
                for n in names if BROKER_DEFAULTS.get(n, "") != ""]
        return out

    # ---- changes ---------------------------------------------------------------------------
    def validate(self, resource_name: str, new_layer: Mapping[str, str]) -> None:
        """Raise ConfigError naming the first key that cannot be set dynamically or whose
        value is invalid (the resulting effective config must still build)."""
        current = self.layer(resource_name)
        for key, value in new_layer.items():
            if current.get(key) == value:
                continue
            if key not in DYNAMIC_KEYS:
                raise ConfigError(f"Cannot update these configs dynamically: {key} (it is "
                                  "read-only here; set it in server.properties)")
            TOPIC_CONFIGS[_TOPIC_KEY_OF[key]].validator(key, value)
        layers = ({"default": dict(new_layer)} if resource_name == ""
                  else {"broker": dict(new_layer)})
        props = {k: v for k, v in self.effective(**layers).items() if v != ""}
        LogConfig.from_properties(props)

    def update(self, resource_name: str, new_layer: Mapping[str, str]) -> None:
        self.validate(resource_name, new_layer)
        layer = self.layer(resource_name)
        layer.clear()
        layer.update(new_layer)
        self._persist()
        self.apply()
        log.info("dynamic broker configs (%s) are now %s",
                 "cluster default" if resource_name == "" else f"broker {resource_name}",
                 dict(new_layer) or "empty")

    def apply(self) -> None:
        """Make the effective config live: the broker's props and every log's defaults."""
        effective = self.effective()
        self.config.props.clear()
        self.config.props.update(effective)
        defaults = LogConfig.from_properties({k: v for k, v in effective.items() if v != ""})
        self.partitions.update_default_config(defaults)
