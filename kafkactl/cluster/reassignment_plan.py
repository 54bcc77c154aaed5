"""The partition reassignment planner of `kafkactl rebalance --partitions` (a pure function:
cluster state in, plan out), and kafka-reassign-partitions' JSON plan format.

What a plan is, topic by topic:

- **Balanced.** Over the live brokers, every broker holds ⌊P·R/n⌋ or ⌈P·R/n⌉ of the topic's
  P·R replicas, and leads (is the first replica of) ⌊P/n⌋ or ⌈P/n⌉ of its P partitions when
  the replica sets allow it. Dead brokers hold none: their replicas move to live ones.
- **Minimal.** Among all balanced assignments, one with the fewest replica moves (a move is
  a replica on a broker that does not hold the partition yet: a copy of its data); then, for
  those replica sets, the fewest leader changes. An already balanced topic plans nothing.
  (Kafka's placement of a new topic, which CreateTopics follows, is balanced in this sense
  on up to 3 brokers; on more it can leave one broker two replicas ahead of another, which
  the planner evens out with a move or two.)
- **The replication factor is never lowered.** A topic's replication factor R is the largest
  replica count among its partitions, unless `replication_factor` sets it on purpose. With
  fewer live brokers than R the topic is refused (with the reason), never planned smaller.
- **Per topic, deterministic.** Each topic is planned from its own replicas, the live
  brokers and the cluster-wide replica count of each broker (ties go to the least loaded
  broker, then the lowest id), never from the other planned topics: a plan for `-t A` is
  exactly A's part of the plan for every topic.

Both steps are minimum-cost flows (successive shortest paths found by a Bellman-Ford queue,
from a greedy start of cost 0), exact for every input:

    source -R-> partition -1-> broker -q-> sink        (cost 0 if the broker holds the
                                 broker -1-> extra -r-> sink    partition today, else 1)

with q = ⌊P·R/n⌋ and r = P·R - q·n: every edge into the sink is full in a maximal flow, so
each broker ends with q or q+1 replicas, exactly r of them with q+1. The leader step is the
same network over the chosen replica sets with R = 1 (cost 0 for the current leader).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]
ANY_LOG_DIR = "any"


@dataclass
class Plan:
    """targets: partition -> new replicas (first is the preferred leader), only for the
    partitions that change; refused: topic -> why it was not planned."""

    targets: dict[TopicPartition, list[int]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    replica_moves: int = 0
    leader_changes: int = 0
    # partition -> why its move was left out: it could not finish (stranded_moves)
    stranded: dict[TopicPartition, str] = field(default_factory=dict)


# ---- minimum-cost flow -----------------------------------------------------------------

class _Flow:
    def __init__(self, nodes: int) -> None:
        self.graph: list[list[int]] = [[] for _ in range(nodes)]
        self.to: list[int] = []
        self.cap: list[int] = []
        self.cost: list[int] = []

    def edge(self, u: int, v: int, cap: int, cost: int) -> int:
        """An edge u -> v (and its residual twin); returns its index."""
        i = len(self.to)
        self.to += [v, u]
        self.cap += [cap, 0]
        self.cost += [cost, -cost]
        self.graph[u].append(i)
        self.graph[v].append(i + 1)
        return i

    def push(self, path: Sequence[int], amount: int = 1) -> None:
        for i in path:
            self.cap[i] -= amount
            self.cap[i ^ 1] += amount

    def shortest_path(self, source: int, sink: int) -> list[int] | None:
        """The edges of a cheapest source -> sink path with room (Bellman-Ford by queue:
        residual edges cost less than zero, never in a cycle while the flow is of
        minimum cost), or None."""
        inf = float("inf")
        dist = [inf] * len(self.graph)
        via = [-1] * len(self.graph)
        dist[source] = 0
        queued = [False] * len(self.graph)
        queue = deque([source])
        queued[source] = True
        while queue:
            u = queue.popleft()
            queued[u] = False
            for i in self.graph[u]:
                v = self.to[i]
                if self.cap[i] > 0 and dist[u] + self.cost[i] < dist[v]:
                    dist[v] = dist[u] + self.cost[i]
                    via[v] = i
                    if not queued[v]:
                        queued[v] = True
                        queue.append(v)
        if dist[sink] == inf:
            return None
        path: list[int] = []
        v = sink
        while v != source:
            i = via[v]
            path.append(i)
            v = self.to[i ^ 1]
        return path[::-1]


def _balanced_choice(options: Sequence[Sequence[int]], preferred: Sequence[Sequence[int]],
                     brokers: Sequence[int], per_item: int, spread: int
                     ) -> list[list[int]] | None:
    """For item k, per_item distinct brokers out of options[k], every broker chosen by
    ⌊total/n⌋ or ⌈total/n⌉ items (with `spread` > 1: by at most ⌊total/n⌋ + spread, for
    when that is impossible), choosing as few brokers outside preferred[k] as can be.
    None if no choice fills every item."""
    n = len(brokers)
    items = len(options)
    total = items * per_item
    q, r = divmod(total, n)
    source, extra, sink = 0, 1, 2
    item0, broker0 = 3, 3 + items
    index = {b: broker0 + j for j, b in enumerate(brokers)}
    flow = _Flow(broker0 + n)
    into: list[int] = []
    chosen: list[list[tuple[int, int]]] = []
    for k, opts in enumerate(options):
        into.append(flow.edge(source, item0 + k, per_item, 0))
        keep = [b for b in dict.fromkeys(preferred[k]) if b in index and b in opts]
        ordered = keep + [b for b in opts if b not in keep]
        chosen.append([(b, flow.edge(item0 + k, index[b], 1, 0 if b in keep else 1))
                       for b in ordered])
    out: dict[int, tuple[int, int | None]] = {}  # broker -> (edge to sink, edge to extra)
    for b, node in index.items():
        if spread == 1:
            out[b] = (flow.edge(node, sink, q, 0), flow.edge(node, extra, 1, 0) if r else None)
        else:
            out[b] = (flow.edge(node, sink, q + spread, 0), None)
    last = flow.edge(extra, sink, r, 0) if spread == 1 and r else None

    def direct(cost: int) -> None:
        """Push every one-broker path item -> broker -> sink whose edge costs `cost`."""
        for k, row in enumerate(chosen):
            for b, i in row:
                if flow.cap[into[k]] == 0:
                    break
                if flow.cost[i] != cost or flow.cap[i] == 0:
                    continue
                to_sink, to_extra = out[b]
                if flow.cap[to_sink] > 0:
                    flow.push([into[k], i, to_sink])
                elif to_extra is not None and last is not None and flow.cap[to_extra] > 0 \
                        and flow.cap[last] > 0:
                    flow.push([into[k], i, to_extra, last])

    # Successive shortest paths, with shortcuts: first every preferred choice that fits
    # (a flow of cost 0 is of minimum cost); and once the cheapest path costs 1, every
    # direct path of cost 1 is a cheapest one too (path costs never decrease).
    direct(0)
    while (path := flow.shortest_path(source, sink)) is not None:
        flow.push(path, min(flow.cap[i] for i in path))
        if sum(flow.cost[i] for i in path) == 1:
            direct(1)
    if any(flow.cap[i] for i in into):
        return None
    return [[b for b, i in row if flow.cap[i] == 0] for row in chosen]


# ---- the planner ------------------------------------------------------------------------

def topic_replication_factor(partitions: Mapping[int, Sequence[int]]) -> int:
    return max((len(r) for r in partitions.values()), default=0)


def _keep_leaders(current: list[list[int]], sets: list[list[int]]) -> list[list[int]]:
    """Among replica sets of as few moves, prefer those that keep current leaders: where
    partition p lost its leader L and another partition q holds L as a follower, and p
    holds an x that q lacks, swap them (p gets L back, q gets x) when that copies no more
    replicas. Every broker keeps its count (the balance holds) and each swap keeps one
    more leader, so this ends."""
    sets = [list(s) for s in sets]

    def moves(i: int, chosen: list[int]) -> int:
        return len(set(chosen) - set(current[i]))

    swapped = True
    while swapped:
        swapped = False
        for p, old in enumerate(current):
            lead = old[0] if old else None
            if lead is None or lead in sets[p]:
                continue
            for q, other in enumerate(sets):
                if q == p or lead not in other or (current[q] and current[q][0] == lead):
                    continue
                for x in sets[p]:
                    if x in other:
                        continue
                    new_p = [b for b in sets[p] if b != x] + [lead]
                    new_q = [b for b in other if b != lead] + [x]
                    if moves(p, new_p) + moves(q, new_q) <= moves(p, sets[p]) + moves(q, other):
                        sets[p], sets[q] = new_p, new_q
                        swapped = True
                        break
                if swapped:
                    break
            if swapped:
                break
    return sets


def _plan_topic(name: str, partitions: Mapping[int, Sequence[int]], live: list[int],
                rf: int, plan: Plan, leader_of: Mapping[TopicPartition, int] | None) -> None:
    ids = sorted(partitions)
    current = [list(dict.fromkeys(partitions[p])) for p in ids]
    # the replica sets: each partition keeps what it can of its live replicas
    kept = [[b for b in c if b in live] for c in current]
    sets = _balanced_choice([live] * len(ids), kept, live, rf, 1)
    if sets is None:  # impossible with rf <= len(live); kept as a guard
        plan.refused[name] = f"topic {name!r}: no balanced assignment was found"
        return
    sets = _keep_leaders(current, sets)
    # the leaders: each partition's current first replica, when balance allows
    first = [[c[0]] if c and c[0] in s else [] for c, s in zip(current, sets, strict=True)]
    leaders = None
    for spread in range(1, len(ids) + 2):
        leaders = _balanced_choice(sets, first, live, 1, spread)
        if leaders is not None:
            break
    assert leaders is not None  # with unbounded spread any replica may lead
    for p, old, new_set, lead in zip(ids, current, sets, leaders, strict=True):
        leader = lead[0]
        rest = [b for b in old if b in new_set and b != leader] + \
            [b for b in live if b in new_set and b not in old and b != leader]
        target = [leader, *rest]
        if target != list(partitions[p]):
            stuck = {} if leader_of is None else stranded_moves(
                {(name, p): target}, {(name, p): partitions[p]}, live, leader_of)
            if stuck:
                plan.stranded.update(stuck)
                continue
            plan.targets[(name, p)] = target
            plan.replica_moves += len(set(target) - set(old))
            plan.leader_changes += int(not old or old[0] != leader)


def plan_reassignment(assignments: Mapping[str, Mapping[int, Sequence[int]]],
                      live_brokers: Iterable[int], *, topics: Iterable[str] | None = None,
                      replication_factor: int | None = None,
                      in_progress: Iterable[TopicPartition] = (),
                      leaders: Mapping[TopicPartition, int] | None = None) -> Plan:
    """Plan `topics` (default: every topic of `assignments`, the whole cluster's replica
    sets) over `live_brokers`. `replication_factor` sets the replication factor of every
    planned topic; partitions in `in_progress` (reassignments not finished) make their
    topic refused. Given `leaders` (each partition's leader, -1 for none: the cluster as it
    is, not only its replica sets), a move that could not finish (stranded_moves) is left
    out of the targets and said in `stranded`: the rest of its topic is still planned (as
    the other topics are when one is refused)."""
    load: dict[int, int] = {b: 0 for b in live_brokers}
    for parts in assignments.values():
        for replicas in parts.values():
            for b in replicas:
                if b in load:
                    load[b] += 1
    live = sorted(load, key=lambda b: (load[b], b))  # ties: least loaded, lowest id
    moving: dict[str, list[int]] = {}
    for t, p in in_progress:
        moving.setdefault(t, []).append(p)
    plan = Plan()
    wanted = sorted(assignments) if topics is None else sorted(set(topics))
    for name in wanted:
        if name not in assignments:
            plan.refused[name] = f"topic {name!r} does not exist"
            continue
        parts = assignments[name]
        if not parts:
            continue
        if name in moving:
            shown = ", ".join(f"{name}-{p}" for p in sorted(moving[name]))
            plan.refused[name] = (
                f"topic {name!r} has reassignments in progress ({shown}): wait for them "
                "(--verify) or cancel them (--cancel) first")
            continue
        current_rf = topic_replication_factor(parts)
        rf = replication_factor if replication_factor is not None else current_rf
        if rf > len(live):
            shown = ", ".join(map(str, sorted(live))) or "none"
            lowering = (f"its replication factor is {rf}" if replication_factor is None else
                        f"replication factor {rf} was asked for")
            why = ("that would lower its replication factor" if replication_factor is None
                   else "a partition cannot have more replicas than live brokers")
            plan.refused[name] = (
                f"topic {name!r}: {lowering} but only {len(live)} broker(s) are live "
                f"({shown}); it is not planned ({why}): start the missing brokers"
                + (", or lower it on purpose with --replication-factor"
                   if replication_factor is None else
                   f", or ask for {len(live)} or fewer"))
            continue
        _plan_topic(name, parts, live, rf, plan, leaders)
    return plan


def stranded_moves(targets: Mapping[TopicPartition, Sequence[int]],
                   current: Mapping[TopicPartition, Sequence[int]],
                   live_brokers: Iterable[int],
                   leaders: Mapping[TopicPartition, int] | None = None
                   ) -> dict[TopicPartition, str]:
    """The moves of `targets` that could not finish while the brokers stay as they are,
    each with the reason: a reassignment completes once every target replica is in sync,
    and a new replica gets in sync by fetching from the partition's leader. A partition
    without a live leader (`leaders` not given: none of its `current` replicas on a live
    broker) has nothing to copy from, so its move would stay in progress (and keep its
    topic from being planned again) until a replica that can lead is back."""
    live = set(live_brokers)
    out: dict[TopicPartition, str] = {}
    for tp, target in targets.items():
        now = list(current.get(tp, ()))
        if list(target) == now:
            continue
        up = [b for b in now if b in live]
        if (leaders.get(tp, -1) in live) if leaders is not None else bool(up):
            continue
        down = [b for b in now if b not in live]
        start = (f"start broker {down[0]}" if len(down) == 1 else
                 f"start one of brokers {', '.join(map(str, down))}")
        if not up:
            out[tp] = (f"its replicas ({','.join(map(str, now))}) are all on brokers that "
                       "are not live: a new replica would have nothing to copy from, so the "
                       f"move could not finish until one of them is back ({start} first)")
        else:
            out[tp] = (f"it has no leader (its live replicas {','.join(map(str, up))} are "
                       "not in sync): a new replica would have nothing to copy from, so "
                       "the move could not finish until an in-sync replica is back ("
                       + (f"{start} first, or " if down else "")
                       + "elect an out-of-sync leader with `kafkactl rebalance "
                       "--unclean-leaders`, which may lose records)")
    return out


def is_balanced(partitions: Mapping[int, Sequence[int]], live_brokers: Iterable[int],
                rf: int) -> bool:
    """Every partition has rf distinct live replicas, and every live broker holds within
    one of the same number of them."""
    live = set(live_brokers)
    if not live:
        return False
    counts = dict.fromkeys(live, 0)
    for replicas in partitions.values():
        if len(replicas) != rf or len(set(replicas)) != rf or not set(replicas) <= live:
            return False
        for b in replicas:
            counts[b] += 1
    return max(counts.values()) - min(counts.values()) <= 1


# ---- kafka-reassign-partitions' JSON ----------------------------------------------------

class PlanFormatError(ValueError):
    """A reassignment JSON file that cannot be used (the message says why)."""


def to_reassignment_json(targets: Mapping[TopicPartition, Sequence[int]]) -> str:
    """{"version":1,"partitions":[{"topic","partition","replicas","log_dirs"}]}, sorted by
    topic and partition, without spaces (kafka-reassign-partitions' layout, byte for
    byte)."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(targets[(t, p)]),
         "log_dirs": [ANY_LOG_DIR] * len(targets[(t, p)])}
        for t, p in sorted(targets)]}, separators=(",", ":"))


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanFormatError(f"{what} must be an integer, not {json.dumps(value)}")
    return value


def _parse_row(i: int, row: object) -> tuple[TopicPartition, list[int]]:
    if not isinstance(row, dict):
        raise PlanFormatError(f"partitions[{i}] must be an object")
    for key in ("topic", "partition", "replicas"):
        if key not in row:
            raise PlanFormatError(f'partitions[{i}] has no "{key}"')
    topic = row["topic"]
    if not isinstance(topic, str) or not topic:
        raise PlanFormatError(f"partitions[{i}].topic must be a topic name")
    partition = _int(row["partition"], f"partitions[{i}].partition")
    name = f"{topic}-{partition}"
    replicas_raw = row["replicas"]
    if not isinstance(replicas_raw, list):
        raise PlanFormatError(f"{name}: replicas must be a list of broker ids")
    replicas = [_int(b, f"{name}: a replica") for b in replicas_raw]
    if not replicas:
        raise PlanFormatError(f"Partition replica list cannot be empty ({name})")
    extra = sorted({b for b in replicas if replicas.count(b) > 1})
    if extra:
        raise PlanFormatError("Partition replica lists may not contain duplicate entries: "
                              f"{name} contains multiple entries for "
                              f"{','.join(map(str, extra))}")
    log_dirs = row.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
    if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
        raise PlanFormatError(f"Size of replicas list {replicas} is different from size "
                              f"of log dirs list {log_dirs} for partition {name}")
    moved = [(b, d) for b, d in zip(replicas, log_dirs, strict=True) if d != ANY_LOG_DIR]
    if moved:
        raise PlanFormatError(
            f"{name}: log_dirs other than \"any\" are not supported (kafkactl does not "
            f"move replicas between log directories): broker {moved[0][0]} -> "
            f"{json.dumps(moved[0][1])}")
    return (topic, partition), replicas


def parse_reassignment_json(text: str) -> dict[TopicPartition, list[int]]:
    """A reassignment plan in kafka-reassign-partitions' JSON format -> partition ->
    replicas; PlanFormatError with the reason for anything else."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise PlanFormatError(f"the plan is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise PlanFormatError('the plan must be a JSON object {"version": 1, "partitions": '
                              "[...]}")
    version = doc.get("version", 1)
    if version != 1:
        raise PlanFormatError(f"Not supported version field value {json.dumps(version)}")
    rows = doc.get("partitions", [])
    if not isinstance(rows, list):
        raise PlanFormatError('"partitions" must be a list')
    out: dict[TopicPartition, list[int]] = {}
    duplicates: list[str] = []
    for i, row in enumerate(rows):
        tp, replicas = _parse_row(i, row)
        if tp in out:
            duplicates.append(f"{tp[0]}-{tp[1]}")
        out[tp] = replicas
    if duplicates:
        raise PlanFormatError("Partition reassignment contains duplicate topic partitions: "
                              + ",".join(duplicates))
    if not out:
        raise PlanFormatError("Partition reassignment list cannot be empty")
    return out


# ---- replication throttles for a reassignment (kafka-reassign-partitions --throttle) ----------
@dataclass
class Throttles:
    """What `--throttle` sets for a plan, as Kafka's tool computes it: per topic, the
    `leader.replication.throttled.replicas` (every source replica of each moving partition:
    whichever leads sends the copies) and `follower.replication.throttled.replicas` (each
    new replica: it fetches them); and the brokers on which the two rates are set (every
    broker holding or receiving a replica of a moving partition)."""

    leader: dict[str, str] = field(default_factory=dict)
    follower: dict[str, str] = field(default_factory=dict)
    brokers: list[int] = field(default_factory=list)


# a reassignment in progress, as ListPartitionReassignments lists it: (replicas, adding,
# removing)
Ongoing = tuple[Sequence[int], Sequence[int], Sequence[int]]


def reassignment_throttles(targets: Mapping[TopicPartition, Sequence[int]],
                           current: Mapping[TopicPartition, Sequence[int]],
                           ongoing: Mapping[TopicPartition, Ongoing] | None = None
                           ) -> Throttles:
    """The throttles of the moves `targets` (from `current`) together with the
    reassignments `ongoing` (kafka-reassign-partitions' calculateProposedMoveMap): the
    configs of a topic are set whole, so they must name the replicas of the moves already
    running too, or those would copy unthrottled from then on. A partition in both keeps
    the sources of its running move (its replicas before that move began)."""
    sources: dict[TopicPartition, set[int]] = {}
    destinations: dict[TopicPartition, set[int]] = {}
    for tp, (replicas, adding, _removing) in (ongoing or {}).items():
        sources[tp] = set(replicas) - set(adding)
        destinations[tp] = set(adding)
    for tp, target in targets.items():
        now = list(current.get(tp, ()))
        if tp not in sources and list(target) == now:
            continue
        from_ = sources.get(tp, set(now))
        sources[tp] = from_
        destinations[tp] = set(target) - from_
    leader: dict[str, dict[int, set[int]]] = {}
    follower: dict[str, dict[int, set[int]]] = {}
    brokers: set[int] = set()
    for (topic, p), from_ in sorted(sources.items()):
        leader.setdefault(topic, {})[p] = from_
        if destinations[(topic, p)]:
            follower.setdefault(topic, {})[p] = destinations[(topic, p)]
        brokers |= from_ | destinations[(topic, p)]

    def fmt(replicas: dict[int, set[int]]) -> str:
        return ",".join(f"{p}:{b}" for p in sorted(replicas) for b in sorted(replicas[p]))
    return Throttles({t: fmt(r) for t, r in leader.items() if any(r.values())},
                     {t: fmt(r) for t, r in follower.items()}, sorted(brokers))
