"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Topic resources have dynamic overrides (decided by the TopicAdmin); broker resources
(this broker's id, or "" for the cluster-wide default) have the dynamic broker configs of
KIP-226 (kafkactl.broker.dynamic_config); every other broker key is read-only.

In a ZooKeeper cluster, as in Kafka, a topic's configs are described from ZooKeeper's
/config/topics/[t] over this broker's defaults, so any broker answers for any topic,
hosting a replica of it or not; a change is written there with a /config/changes
notification that every broker applies (kafkactl.cluster.config_changes), and so is a
change of the dynamic broker configs (/config/brokers/[id] or <default>).

Broker logger resources (KIP-412, resource name = this broker's id) are the log levels of
this broker's Python loggers (kafkactl.broker.broker_loggers): described, and changed by
IncrementalAlterConfigs only, on this broker only and until it stops, as in Kafka.

Both alter APIs first refuse, as Kafka's ConfigAdminManager.preprocess (3.2 and later),
with INVALID_REQUEST and before any authorization: every copy of a resource named twice
("Each resource must appear at most once."), a resource with a config key given twice
("Error due to duplicate config keys") or a null value other than an incremental DELETE's
("Null value not supported for : <keys>"). The default topic resource (named "") is
INVALID_REQUEST too ("Default topic resources are not allowed.").
"""

from __future__ import annotations

from typing import Any

from kafkactl.broker.broker_loggers import (
    BrokerLoggerError,
    alter_broker_loggers,
    describe_broker_loggers,
)
from kafkactl.broker.config import BROKER_DEFAULTS, TOPIC_DEFAULT_KEYS, BrokerConfig
from kafkactl.broker.config_types import key_type_of
from kafkactl.broker.dynamic_config import (
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    TOPIC_CONFIG_SYNONYMS,
    DynamicBrokerConfig,
    is_dynamic,
)
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import authorize_cluster, authorize_topic
from kafkactl.broker.services import BrokerServices
from kafkactl.broker.topic_admin import TopicError, TopicState
from kafkactl.broker.zk_topic_admin import ZkTopicAdmin
from kafkactl.log.config import LogConfig
from kafkactl.log.config_def import (
    PASSWORD,
    config_type,
    describe_values,
    is_list,
)
from kafkactl.log.errors import ConfigError
from kafkactl.protocol.errors import ErrorCode

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
TYPE_BOOLEAN, TYPE_STRING, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 5, 6, 7
# Kafka's DescribeConfigs ConfigType of a ConfigDef type
_CONFIG_TYPES = {"BOOLEAN": TYPE_BOOLEAN, "INT": 3, "SHORT": 4, "LONG": TYPE_LONG,
                 "DOUBLE": TYPE_DOUBLE}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _type_of(value: str, key: str) -> int:
    """The ConfigType of a broker key: its ConfigDef type where this broker knows it, else
    guessed from the value."""
    known = key_type_of(key)
    if known is not None and known.type in _CONFIG_TYPES:
        return _CONFIG_TYPES[known.type]
    if value in ("true", "false"):
        return TYPE_BOOLEAN
    try:
        int(value)
        return TYPE_LONG
    except ValueError:
        pass
    try:
        float(value)
        return TYPE_DOUBLE
    except ValueError:
        return TYPE_STRING


def topic_config_entries(services: BrokerServices, config: LogConfig, overrides: dict[str, str],
                         include_synonyms: bool = False) -> list[dict[str, Any]]:
    """A topic's configs as Kafka's createTopicConfigEntry describes them: each with its
    synonyms, highest precedence first: the topic's override (DYNAMIC_TOPIC_CONFIG), then
    the synonyms of its broker key (TOPIC_CONFIG_SYNONYMS) in every broker layer (see
    DynamicBrokerConfig.synonyms); its source is the first synonym's."""
    entries = []
    for key, value in describe_values(config).items():
        broker_key = TOPIC_CONFIG_SYNONYMS.get(key)
        synonyms = services.dynamic_config.synonyms(broker_key) if broker_key else []
        if key in overrides:
            synonyms.insert(0, {"name": key, "value": value, "source": DYNAMIC_TOPIC_CONFIG})
        source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
        entries.append({"name": key, "value": value, "read_only": False,
                        "is_default": source == DEFAULT_CONFIG, "config_source": source,
                        "is_sensitive": False,
                        "synonyms": synonyms if include_synonyms else [],
                        "config_type": config_type(key), "documentation": None})
    return entries


def _broker_entry(dyn: DynamicBrokerConfig, config: BrokerConfig, key: str,
                  value: str | None, source: int,
                  synonyms: list[dict[str, Any]]) -> dict[str, Any]:
    sensitive = config.is_sensitive(key)
    if sensitive:
        synonyms = [dict(x, value=None) for x in synonyms]
    return {"name": key, "value": None if sensitive else value,
            "read_only": not is_dynamic(key),
            "is_default": source == DEFAULT_CONFIG, "config_source": source,
            "is_sensitive": sensitive, "synonyms": synonyms,
            "config_type": PASSWORD if sensitive else _type_of(value or "", key),
            "documentation": dyn.describe_note(key)}


def _broker_entries(services: BrokerServices, rname: str,
                    include_synonyms: bool) -> list[dict[str, Any]]:
    """Kafka's createBrokerConfigEntry: this broker's keys (resource name = its id), or the
    cluster default's dynamic configs (""), whose synonyms are those of that layer only;
    a key's source is its first synonym's."""
    dyn, config = services.dynamic_config, services.config
    values: list[tuple[str, str | None]]
    if rname == "":
        values = sorted(dyn.default.items())
    else:
        keys = set(BROKER_DEFAULTS) | set(TOPIC_DEFAULT_KEYS) | set(config.props)
        values = [(key, config.described_value(key)) for key in sorted(keys)]
    entries = []
    for key, value in values:
        synonyms = dyn.synonyms(key)
        if rname == "":
            synonyms = [x for x in synonyms if x["source"] == DYNAMIC_DEFAULT_BROKER_CONFIG]
        source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
        entries.append(_broker_entry(dyn, config, key, value, source,
                                     synonyms if include_synonyms else []))
    return entries


def _refusal(services: BrokerServices, ctx: RequestContext, rtype: int, rname: str,
             operation: AclOperation) -> int:
    """The authorization error for DescribeConfigs / AlterConfigs on a resource, or 0:
    the topic or the cluster (for a broker or broker logger resource), as Kafka checks."""
    if rtype == TOPIC and not authorize_topic(services, ctx, operation, rname):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if rtype in (BROKER, BROKER_LOGGER) and not authorize_cluster(services, ctx, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return 0


async def _topic_overrides(services: BrokerServices, state: TopicState) -> dict[str, str]:
    """A topic's overrides: in a cluster as ZooKeeper has them (this broker may host no
    replica of the topic, or not have applied the latest change yet), else the admin's."""
    return (await _overrides_of(services, [state]))[state.name]


async def _overrides_of(services: BrokerServices,
                        states: list[TopicState]) -> dict[str, dict[str, str]]:
    """Topics' overrides, read from ZooKeeper in one round trip in a cluster."""
    admin = services.topic_admin
    if isinstance(admin, ZkTopicAdmin) and states:
        found = await admin.call(admin.topics_overrides, [s.name for s in states],
                                 timeout_s=0)
        return {name: o if o is not None else {} for name, o in found.items()}
    return {s.name: dict(s.configs) for s in states}


def _topic_log_config(services: BrokerServices, name: str,
                      overrides: dict[str, str]) -> LogConfig:
    """This broker's defaults with the topic's overrides (INVALID_CONFIG if they do not
    build: a znode written by hand)."""
    try:
        return services.partitions.configs.log_config_for(overrides)
    except ValueError as e:
        raise TopicError(ErrorCode.INVALID_CONFIG,
                         f"the configs of topic {name!r} are invalid: {e}") from None


async def handle_describe_configs(services: BrokerServices, ctx: RequestContext,
                                  request: dict[str, Any]) -> dict[str, Any]:
    resources = [(r, _refusal(services, ctx, r["resource_type"], r["resource_name"],
                              AclOperation.DESCRIBE_CONFIGS)) for r in request["resources"]]
    topics = {r["resource_name"]: services.topic_admin.topic(r["resource_name"])
              for r, refusal in resources if r["resource_type"] == TOPIC and not refusal}
    unreadable: TopicError | None = None
    try:  # the described topics' overrides at once (Sarama asks for every topic)
        overrides_of = await _overrides_of(services, [s for s in topics.values() if s])
    except TopicError as e:
        overrides_of, unreadable = {}, e
    include_synonyms = request.get("include_synonyms", False)
    results = []
    for r, refusal in resources:
        rtype, rname = r["resource_type"], r["resource_name"]
        keys = r.get("configuration_keys")
        res: dict[str, Any] = {"resource_type": rtype, "resource_name": rname,
                               "error_code": ErrorCode.NONE, "error_message": None, "configs": []}
        if refusal:
            res.update(error_code=refusal, error_message="Authorization failed.")
        elif rtype == TOPIC:
            if topics.get(rname) is None:
                res.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           error_message=f"topic {rname!r} does not exist")
            elif unreadable is not None:
                res.update(error_code=unreadable.code, error_message=str(unreadable))
            else:
                overrides = overrides_of.get(rname, {})
                try:
                    res["configs"] = topic_config_entries(
                        services, _topic_log_config(services, rname, overrides), overrides,
                        include_synonyms)
                except TopicError as e:
                    res.update(error_code=e.code, error_message=str(e))
        elif rtype == BROKER:
            broker_id = services.metadata_cache.broker_id
            if rname not in ("", str(broker_id)):
                res.update(error_code=ErrorCode.INVALID_REQUEST,
                           error_message=f"this is broker {broker_id}, not {rname}")
            else:
                res["configs"] = _broker_entries(services, rname, include_synonyms)
        elif rtype == BROKER_LOGGER:
            try:
                res["configs"] = describe_broker_loggers(services.metadata_cache.broker_id,
                                                         rname)
            except BrokerLoggerError as e:
                res.update(error_code=e.code, error_message=e.message)
        else:
            res.update(error_code=ErrorCode.INVALID_REQUEST,
                       error_message=f"resource type {rtype} is not supported")
        if keys is not None and res["configs"]:
            wanted = set(keys)
            res["configs"] = [e for e in res["configs"] if e["name"] in wanted]
        results.append(res)
    return {"throttle_time_ms": 0, "results": results}


def _malformed(r: dict[str, Any], incremental: bool) -> str | None:
    """What Kafka's ConfigAdminManager.preprocess refuses in a resource of either API
    (INVALID_REQUEST, before authorization): a config key given twice, or a null value on
    anything but an incremental DELETE."""
    names = [c["name"] for c in r["configs"]]
    if len(set(names)) != len(names):
        return "Error due to duplicate config keys"
    nulls = [c["name"] for c in r["configs"] if c["value"] is None
             and not (incremental and c["config_operation"] == DELETE)]
    if nulls:
        return "Null value not supported for : " + ", ".join(nulls)
    return None


async def _alter(services: BrokerServices, ctx: RequestContext, request: dict[str, Any],
                 incremental: bool) -> dict[str, Any]:
    responses = []
    seen: dict[tuple[int, str], int] = {}
    for r in request["resources"]:
        key = (r["resource_type"], r["resource_name"])
        seen[key] = seen.get(key, 0) + 1
    for r in request["resources"]:
        rtype, rname = r["resource_type"], r["resource_name"]
        res: dict[str, Any] = {"resource_type": rtype, "resource_name": rname,
                               "error_code": ErrorCode.NONE, "error_message": None}
        malformed = "Each resource must appear at most once." \
            if seen[(rtype, rname)] > 1 else _malformed(r, incremental)
        if malformed is not None:  # every copy of a repeated resource is refused, as Kafka
            res.update(error_code=ErrorCode.INVALID_REQUEST, error_message=malformed)
            responses.append(res)
            continue
        if rtype == BROKER_LOGGER and not incremental:  # as Kafka: a KIP-412 level only
            res.update(error_code=ErrorCode.INVALID_REQUEST,  # through the incremental API
                       error_message="AlterConfigs does not support the resource type "
                                     "BROKER_LOGGER: use IncrementalAlterConfigs")
            responses.append(res)
            continue
        refusal = _refusal(services, ctx, rtype, rname, AclOperation.ALTER_CONFIGS)
        if refusal:
            res.update(error_code=refusal, error_message="Authorization failed.")
            responses.append(res)
            continue
        try:
            if rtype == BROKER:
                await _alter_broker(services, r, incremental, request["validate_only"])
                responses.append(res)
                continue
            if rtype == BROKER_LOGGER:  # this broker's only: not in ZooKeeper, not kept
                alter_broker_loggers(services.metadata_cache.broker_id, rname, r["configs"],
                                     validate_only=request["validate_only"])
                responses.append(res)
                continue
            if rtype != TOPIC:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 f"resource type {rtype} cannot be altered")
            if rname == "":  # as Kafka's ZkAdminManager (and its KRaft controller)
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 "Default topic resources are not allowed.")
            state = services.topic_admin.topic(rname)
            if state is None:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"topic {rname!r} does not exist")
            if incremental:
                new = await _topic_overrides(services, state)
                current = describe_values(_topic_log_config(services, rname, new))
                for c in r["configs"]:
                    _apply_op(new, current, c["name"], c["config_operation"], c["value"])
            else:
                new = _replacement(r["configs"])
            admin = services.topic_admin  # a cluster's waits on ZooKeeper off the event loop
            await admin.call(admin.set_configs, rname, new,
                             validate_only=request["validate_only"], timeout_s=0)
        except TopicError as e:
            res.update(error_code=e.code, error_message=str(e))
        except BrokerLoggerError as e:
            res.update(error_code=e.code, error_message=e.message)
        responses.append(res)
    return {"throttle_time_ms": 0, "responses": responses}


def _replacement(configs: list[dict[str, Any]]) -> dict[str, str]:
    """AlterConfigs' (non-incremental) new set of keys: every value must be given."""
    new: dict[str, str] = {}
    for c in configs:
        if c["value"] is None:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"{c['name']} has a null value")
        new[c["name"]] = c["value"]
    return new


async def _alter_broker(services: BrokerServices, r: dict[str, Any], incremental: bool,
                        validate_only: bool) -> None:
    """KIP-226: replace (AlterConfigs) or edit (IncrementalAlterConfigs) the dynamic
    configs of this broker (resource name = its id) or of the cluster default (""); in a
    cluster written to ZooKeeper first, for every broker to apply."""
    dyn = services.dynamic_config
    rname = r["resource_name"]
    try:
        current = dyn.layer(rname)
    except ConfigError as e:
        raise TopicError(ErrorCode.INVALID_REQUEST, str(e)) from e
    if incremental:
        new = dict(current)
        effective = dyn.effective()
        for c in r["configs"]:
            _apply_op(new, effective, c["name"], c["config_operation"], c["value"],
                      is_list_key=c["name"] == "log.cleanup.policy")
    else:
        new = _replacement(r["configs"])
    try:
        dyn.validate(rname, new)
        if validate_only:
            return
        if services.cluster is not None:
            await _publish(services, rname, new)
        dyn.update(rname, new)
    except ConfigError as e:
        raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from e


async def _publish(services: BrokerServices, rname: str, layer: dict[str, str]) -> None:
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError

    assert services.cluster is not None
    try:
        await services.cluster.publish_broker_config(rname, layer)
    except (KazooException, KazooTimeoutError, TimeoutError) as e:
        raise TopicError(ErrorCode.REQUEST_TIMED_OUT,
                         "changing the dynamic broker configs: ZooKeeper is not reachable "
                         f"from this broker ({type(e).__name__}); retry") from None


def _apply_op(new: dict[str, str], current: dict[str, str], key: str, op: int,
              value: str | None, *, is_list_key: bool | None = None) -> None:
    if op == SET:
        if value is None:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"SET {key} needs a value")
        new[key] = value
    elif op == DELETE:
        new.pop(key, None)
    elif op in (APPEND, SUBTRACT):
        if not (is_list(key) if is_list_key is None else is_list_key):
            raise TopicError(ErrorCode.INVALID_CONFIG, f"{key} is not a list config")
        items = [x for x in new.get(key, current.get(key, "")).split(",") if x]
        given = [x.strip() for x in (value or "").split(",") if x.strip()]
        if op == APPEND:
            items += [x for x in given if x not in items]
        else:
            items = [x for x in items if x not in given]
        new[key] = ",".join(items)
    else:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op}")


async def handle_alter_configs(services: BrokerServices, ctx: RequestContext,
                               request: dict[str, Any]) -> dict[str, Any]:
    return await _alter(services, ctx, request, incremental=False)


async def handle_incremental_alter_configs(services: BrokerServices, ctx: RequestContext,
                                           request: dict[str, Any]) -> dict[str, Any]:
    return await _alter(services, ctx, request, incremental=True)
