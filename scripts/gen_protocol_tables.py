"""Draft kafkactl/protocol/messages/*.py from Kafka's protocol JSON specs.

The committed tables are our own Python data (reviewed, trimmed to the advertised version
range); this script only drafts them. Usage::

    python scripts/gen_protocol_tables.py [SPEC_DIR] [--write]

Without ``--write`` it prints the drafts; with it, it (re)writes the message modules.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.specjson import (
    load_spec,
    parse_versions,
    resolve_common_structs,
    snake_case,
)
from kafkactl.protocol.versions import SUPPORTED_VERSIONS

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "kafkactl" / "protocol" / "messages"

# Embedded / internal data schemas: module name -> [(constant, spec file, max version)].
DATA_SCHEMAS: dict[str, list[tuple[str, str]]] = {
    "consumer_protocol": [
        ("SUBSCRIPTION", "ConsumerProtocolSubscription.json"),
        ("ASSIGNMENT", "ConsumerProtocolAssignment.json"),
    ],
    "group_metadata": [
        ("OFFSET_COMMIT_KEY", "OffsetCommitKey.json"),
        ("OFFSET_COMMIT_VALUE", "OffsetCommitValue.json"),
        ("GROUP_METADATA_KEY", "GroupMetadataKey.json"),
        ("GROUP_METADATA_VALUE", "GroupMetadataValue.json"),
    ],
}


PURPOSE: dict[str, str] = {
    "Produce": "append record batches to partitions",
    "Fetch": "read record batches from partitions",
    "ListOffsets": "earliest / latest / by-timestamp offsets",
    "Metadata": "brokers, topics, partitions and leaders",
    "OffsetCommit": "store a group's committed offsets",
    "OffsetFetch": "read a group's committed offsets",
    "FindCoordinator": "locate the group (or transaction) coordinator",
    "JoinGroup": "join a consumer group (first rebalance step)",
    "Heartbeat": "keep a group membership alive",
    "LeaveGroup": "leave a consumer group",
    "SyncGroup": "distribute the leader's assignment (second rebalance step)",
    "DescribeGroups": "group state, protocol and members",
    "ListGroups": "groups known to a coordinator",
    "ApiVersions": "the version handshake (responses always use header v0)",
    "CreateTopics": "create topics",
    "DeleteTopics": "delete topics",
    "DeleteRecords": "move a partition's log start offset forward",
    "InitProducerId": "allocate an idempotent / transactional producer id",
    "OffsetForLeaderEpoch": "end offset of a leader epoch (truncation detection)",
    "DescribeAcls": "list ACL bindings (SECURITY_DISABLED without an authorizer)",
    "CreateAcls": "add ACL bindings (SECURITY_DISABLED without an authorizer)",
    "DeleteAcls": "remove ACL bindings (SECURITY_DISABLED without an authorizer)",
    "SaslHandshake": "pick a SASL mechanism (KIP-43)",
    "SaslAuthenticate": "carry one SASL token in a Kafka request (KIP-152, KIP-368)",
    "DescribeUserScramCredentials": "list users' SCRAM mechanisms and iterations (KIP-554)",
    "AlterUserScramCredentials": "upsert or delete salted SCRAM credentials (KIP-554)",
    "DescribeConfigs": "read topic / broker configs",
    "AlterConfigs": "replace topic / broker configs",
    "IncrementalAlterConfigs": "set / delete / append / subtract config entries",
    "CreatePartitions": "add partitions to topics",
    "DeleteGroups": "delete consumer groups",
    "OffsetDelete": "delete a group's committed offsets for partitions",
    "DescribeCluster": "cluster id, controller and brokers",
    "LeaderAndIsr": "the controller tells a broker which partitions it leads or follows",
    "StopReplica": "the controller tells a broker to stop (and maybe delete) replicas",
    "UpdateMetadata": "the controller sends every broker the cluster's metadata",
    "ControlledShutdown": "a stopping broker asks the controller to move its leaders away",
    "AlterPartition": "a partition leader asks the controller to change its ISR",
    "ElectLeaders": "preferred (or unclean) leader election, through the controller",
    "AlterPartitionReassignments": "move partitions' replicas to other brokers",
    "ListPartitionReassignments": "the partition reassignments in progress",
    "DescribeLogDirs": "log directories, the replicas in each and their sizes",
    "AlterReplicaLogDirs": "move replicas to other log directories of their broker",
    "DescribeClientQuotas": "client quotas matching a filter (KIP-546)",
    "AlterClientQuotas": "set or remove client quotas (KIP-546)",
    "AddPartitionsToTxn": "add partitions to a transaction (v4+: brokers verify, KIP-890)",
    "AddOffsetsToTxn": "add a group's offsets partition to a transaction",
    "TxnOffsetCommit": "commit a group's offsets in a transaction (pending until its marker)",
    "EndTxn": "commit or abort a transaction",
    "WriteTxnMarkers": "the transaction coordinator has partition leaders write markers",
    "DescribeProducers": "a partition's active producers (KIP-664)",
    "DescribeTransactions": "transactions' state, producer and partitions (KIP-664)",
    "ListTransactions": "the transactions a coordinator knows (KIP-664)",
}


def convert_default(ftype: str, raw: Any) -> Any:
    if raw is None or raw == "null":
        return None
    if ftype == "bool":
        return raw if isinstance(raw, bool) else raw == "true"
    if ftype in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return raw if isinstance(raw, int) else int(raw, 0)
    if ftype == "float64":
        return float(raw)
    return raw


def version_str(raw: str | None) -> str | None:
    if raw is None or raw == "none":
        return None
    return raw


def render_fields(fields: list[dict[str, Any]], max_version: int, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for f in fields:
        rng = parse_versions(f.get("versions"))
        if rng is None or rng[0] > max_version:
            continue
        args = [repr(snake_case(f["name"])), repr(f["type"])]
        args.append(repr(f["versions"]))
        if version_str(f.get("nullableVersions")):
            args.append(f"nullable={f['nullableVersions']!r}")
        if "tag" in f:
            args.append(f"tag={f['tag']}")
            args.append(f"tagged={f['taggedVersions']!r}")
        if "default" in f:
            base = f["type"][2:] if f["type"].startswith("[]") else f["type"]
            args.append(f"default={convert_default(base, f['default'])!r}")
        sub = f.get("fields")
        if sub:
            lines.append(f"{pad}F({', '.join(args)}, fields=(")
            lines.extend(render_fields(sub, max_version, indent + 4))
            lines.append(f"{pad})),")
        else:
            lines.append(f"{pad}F({', '.join(args)}),")
    return lines


def render_message(const: str, spec: dict[str, Any], max_version: int) -> list[str]:
    lo = parse_versions(spec["validVersions"])
    assert lo is not None
    valid = f"{lo[0]}-{max_version}" if max_version > lo[0] else f"{lo[0]}"
    flex = parse_versions(spec.get("flexibleVersions"))
    flexible = spec["flexibleVersions"] if flex and flex[0] <= max_version else None
    api_key = spec.get("apiKey")
    head = f"{const} = Message({spec['name']!r}, {api_key!r}, {valid!r}, {flexible!r}, ("
    body = render_fields(resolve_common_structs(spec), max_version, 4)
    return [head, *body, "))"]


def render_module(doc: str, messages: list[tuple[str, dict[str, Any], int]]) -> str:
    lines = [f'"""{doc}"""', "", "from kafkactl.protocol.schema import F, Message"]
    for const, spec, max_version in messages:
        lines.append("")
        lines.extend(render_message(const, spec, max_version))
    return "\n".join(lines) + "\n"


def render_refusals(spec_dir: Path) -> str:
    """messages/refusals.py: for each API Kafka has and we do not serve, its response with
    only the top-level fields (arrays of structs become empty `[]int8` arrays, which encode
    the same), so that a request for it can get a well-formed UNSUPPORTED_VERSION answer."""
    lines = ['"""Responses of the APIs Kafka has and this broker does not serve, reduced to '
             'their\ntop-level fields: enough to answer UNSUPPORTED_VERSION (35) in a '
             'well-formed response\n(every array empty). Only APIs whose response has a '
             'top-level error code are\nlisted. Generated by scripts/gen_protocol_tables.py '
             'from Kafka\'s JSON specs.\n"""', "",
             "from kafkactl.protocol.schema import F, Message", "", "RESPONSES = {"]
    for key in ApiKey:
        if key in SUPPORTED_VERSIONS:
            continue
        path = spec_dir / f"{key.spec_name}Response.json"
        if not path.exists():
            continue
        spec = load_spec(path)
        fields = resolve_common_structs(spec)
        if not any(f["name"] == "ErrorCode" for f in fields):
            continue
        top = []
        for f in fields:
            if f["type"].startswith("[]") and f.get("fields"):
                f = {k: v for k, v in f.items() if k not in ("fields", "default")}
                f["type"] = "[]int8"
            top.append(f)
        rng = parse_versions(spec["validVersions"])
        assert rng is not None
        flex = parse_versions(spec.get("flexibleVersions"))
        flexible = spec["flexibleVersions"] if flex else None
        lines.append(f"    {int(key)}: Message({spec['name']!r}, {int(key)}, "
                     f"{spec['validVersions']!r}, {flexible!r}, (")
        lines.extend(render_fields(top, rng[1], 8))
        lines.append("    )),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    write = "--write" in argv
    args = [a for a in argv if not a.startswith("--")]
    spec_dir = Path(args[0]) if args else ROOT.parent / "shared" / "reference" / "kafka-protocol"
    outputs: dict[str, str] = {}
    for key, (_lo, hi) in sorted(SUPPORTED_VERSIONS.items()):
        name = ApiKey(key).spec_name
        req = load_spec(spec_dir / f"{name}Request.json")
        resp = load_spec(spec_dir / f"{name}Response.json")
        doc = (
            f"{name} (API key {int(key)}, versions 0-{hi}):\n{PURPOSE[name]}.\n\n"
            "Drafted from Kafka's JSON spec by scripts/gen_protocol_tables.py.\n"
        )
        outputs[ApiKey(key).name.lower()] = render_module(
            doc, [("REQUEST", req, hi), ("RESPONSE", resp, hi)]
        )
    for module, items in DATA_SCHEMAS.items():
        msgs = []
        for const, fname in items:
            spec = load_spec(spec_dir / "other" / fname)
            rng = parse_versions(spec["validVersions"])
            assert rng is not None
            msgs.append((const, spec, rng[1]))
        names = ", ".join(spec["name"] for _c, spec, _m in msgs)
        doc = (
            f"Version-prefixed data schemas:\n{names}.\n\n"
            "Drafted from Kafka's JSON specs (other/) by scripts/gen_protocol_tables.py.\n"
        )
        outputs[module] = render_module(doc, msgs)
    outputs["refusals"] = render_refusals(spec_dir)
    for module, text in outputs.items():
        if write:
            (OUT_DIR / f"{module}.py").write_text(text, encoding="utf-8")
        else:
            print(f"# ---- {module}.py\n{text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
