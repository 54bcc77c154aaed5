"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Topic resources have dynamic overrides (persisted by the TopicManager); broker resources are
read-only here (they come from server.properties and --override at start-up).
"""

from __future__ import annotations

from typing import Any

from kafkactl.broker.config import BROKER_DEFAULTS
from kafkactl.broker.topic_manager import TopicError
from kafkactl.log.config_def import (
    PASSWORD,
    config_type,
    describe_values,
    is_list,
    validate_topic_configs,
)
from kafkactl.log.errors import ConfigError
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
TYPE_BOOLEAN, TYPE_STRING, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 5, 6, 7
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _type_of(value: str, key: str) -> int:
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


def _broker_synonyms(server: Any, topic_key: str) -> list[tuple[str, str]]:
    from kafkactl.log.config import BROKER_SYNONYMS

    out = []
    for broker_key, _scale in BROKER_SYNONYMS.get(topic_key, []):
        if broker_key in server.config.props and server.config.props[broker_key] != "":
            out.append((broker_key, server.config.props[broker_key]))
    return out


def topic_config_entries(server: Any, config: Any, overrides: dict[str, str],
                         include_synonyms: bool = False) -> list[dict[str, Any]]:
    entries = []
    explicit = server.explicit_broker_keys
    for key, value in describe_values(config).items():
        synonyms = []
        if key in overrides:
            source = DYNAMIC_TOPIC_CONFIG
            synonyms.append({"name": key, "value": overrides[key], "source": source})
        else:
            source = DEFAULT_CONFIG
        for bk, bv in _broker_synonyms(server, key):
            if bk in explicit:
                if source == DEFAULT_CONFIG:
                    source = STATIC_BROKER_CONFIG
                synonyms.append({"name": bk, "value": bv, "source": STATIC_BROKER_CONFIG})
        entries.append({"name": key, "value": value, "read_only": False,
                        "is_default": source == DEFAULT_CONFIG, "config_source": source,
                        "is_sensitive": False,
                        "synonyms": synonyms if include_synonyms else [],
                        "config_type": config_type(key), "documentation": None})
    return entries


def _broker_entries(server: Any) -> list[dict[str, Any]]:
    entries = []
    explicit = server.explicit_broker_keys
    for key in sorted(set(BROKER_DEFAULTS) | set(server.config.props)):
        value = server.config.get(key)
        sensitive = server.config.is_sensitive(key)
        source = STATIC_BROKER_CONFIG if key in explicit else DEFAULT_CONFIG
        entries.append({"name": key, "value": None if sensitive else value, "read_only": True,
                        "is_default": source == DEFAULT_CONFIG, "config_source": source,
                        "is_sensitive": sensitive, "synonyms": [],
                        "config_type": PASSWORD if sensitive else _type_of(value, key),
                        "documentation": None})
    return entries


def handle_describe_configs(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    server = apis.server
    results = []
    for r in request["resources"]:
        rtype, rname = r["resource_type"], r["resource_name"]
        keys = r.get("configuration_keys")
        res: dict[str, Any] = {"resource_type": rtype, "resource_name": rname,
                               "error_code": ErrorCode.NONE, "error_message": None, "configs": []}
        if rtype == TOPIC:
            state = server.topics.topics.get(rname)
            if state is None:
                res.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           error_message=f"topic {rname!r} does not exist")
            else:
                entries = topic_config_entries(server, server.topics.config_of(rname),
                                               state.configs,
                                               request.get("include_synonyms", False))
                res["configs"] = entries
        elif rtype == BROKER:
            if rname not in ("", str(server.cache.broker_id)):
                res.update(error_code=ErrorCode.INVALID_REQUEST,
                           error_message=f"this is broker {server.cache.broker_id}, not {rname}")
            else:
                res["configs"] = _broker_entries(server)
        else:
            res.update(error_code=ErrorCode.INVALID_REQUEST,
                       error_message=f"resource type {rtype} is not supported")
        if keys is not None and res["configs"]:
            wanted = set(keys)
            res["configs"] = [e for e in res["configs"] if e["name"] in wanted]
        results.append(res)
    return {"throttle_time_ms": 0, "results": results}


def _alter(apis: Any, request: dict[str, Any], incremental: bool) -> dict[str, Any]:
    server = apis.server
    responses = []
    for r in request["resources"]:
        rtype, rname = r["resource_type"], r["resource_name"]
        res: dict[str, Any] = {"resource_type": rtype, "resource_name": rname,
                               "error_code": ErrorCode.NONE, "error_message": None}
        try:
            if rtype != TOPIC:
                raise TopicError("INVALID_REQUEST", "only topic configs can be altered; broker "
                                 "configs come from server.properties / --override")
            state = server.topics.topics.get(rname)
            if state is None:
                raise TopicError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {rname!r} does not exist")
            if incremental:
                new = dict(state.configs)
                current = describe_values(server.topics.config_of(rname))
                for c in r["configs"]:
                    _apply_op(new, current, c["name"], c["config_operation"], c["value"])
            else:
                new = {}
                for c in r["configs"]:
                    if c["value"] is None:
                        raise TopicError("INVALID_CONFIG", f"{c['name']} has a null value")
                    new[c["name"]] = c["value"]
            changed = {k: v for k, v in new.items() if state.configs.get(k) != v}
            try:
                validate_topic_configs(changed)
            except ConfigError as e:
                raise TopicError("INVALID_CONFIG", str(e)) from e
            server.topics.set_configs(rname, new, validate_only=request["validate_only"])
        except TopicError as e:
            res.update(error_code=ErrorCode[e.code_name], error_message=str(e))
        responses.append(res)
    return {"throttle_time_ms": 0, "responses": responses}


def _apply_op(new: dict[str, str], current: dict[str, str], key: str, op: int,
              value: str | None) -> None:
    if op == SET:
        if value is None:
            raise TopicError("INVALID_CONFIG", f"SET {key} needs a value")
        new[key] = value
    elif op == DELETE:
        new.pop(key, None)
    elif op in (APPEND, SUBTRACT):
        if not is_list(key):
            raise TopicError("INVALID_CONFIG", f"{key} is not a list config")
        items = [x for x in new.get(key, current.get(key, "")).split(",") if x]
        given = [x.strip() for x in (value or "").split(",") if x.strip()]
        if op == APPEND:
            items += [x for x in given if x not in items]
        else:
            items = [x for x in items if x not in given]
        new[key] = ",".join(items)
    else:
        raise TopicError("INVALID_REQUEST", f"unknown config operation {op}")


def handle_alter_configs(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    return _alter(apis, request, incremental=False)


def handle_incremental_alter_configs(apis: Any, ctx: Any,
                                     request: dict[str, Any]) -> dict[str, Any]:
    return _alter(apis, request, incremental=True)


def register(apis: Any) -> None:
    apis.register(ApiKey.DESCRIBE_CONFIGS, handle_describe_configs)
    apis.register(ApiKey.ALTER_CONFIGS, handle_alter_configs)
    apis.register(ApiKey.INCREMENTAL_ALTER_CONFIGS, handle_incremental_alter_configs)
