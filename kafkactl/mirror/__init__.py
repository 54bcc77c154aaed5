"""Cross-cluster mirroring (seed 000's mirror cluster), built only on kafkactl.client.

A MirrorMaker consumes the source cluster as a consumer group and republishes every record
(key, value, headers, timestamp) into the target through one idempotent acks=all producer.
Source offsets are committed only up to the first record the target has not acknowledged,
so a killed mirror restarts without losing anything.

`--num-streams N` above 1 runs N worker processes (MirrorWorkers), each a MirrorMaker with
one stream in the same group. The default is 1: on 2 shared cores one process copied
faster than two (bench/mirror.py: the copy path is a byte copy per source batch, so one
process is far from CPU-bound, and a second adds start-up and a rebalance); use more on a
machine with cores to spare and many partitions.

- `config.py`: MirrorConfig, topic renames, consumer properties.
- `progress.py`: per-partition bookkeeping of sent and acknowledged records.
- `topics.py`: TargetTopics, creating missing target topics like the source's.
- `stream.py`: MirrorStream, one group member copying into the shared producer.
- `subscription.py`: SourceTopics, the matching source topics, looked up off the copy path.
- `maker.py`: MirrorMaker, the streams, the producer and the status snapshot.
- `workers.py`: MirrorWorkers, a mirror as N worker processes (`worker.py`), one group.
- `status.py`: MirrorStatus, records/s and lag per topic, and its JSON file.
- `retry.py`: retries backing off as Kafka's clients' (KIP-580), said without a line each.
"""

from kafkactl.mirror.config import (
    MirrorConfig,
    MirrorConfigError,
    parse_num_streams,
    parse_renames,
)
from kafkactl.mirror.maker import MirrorMaker, SendFailure
from kafkactl.mirror.status import MirrorStatus, TopicStatus
from kafkactl.mirror.workers import MirrorWorkers, new_mirror

__all__ = ["MirrorConfig", "MirrorConfigError", "MirrorMaker", "MirrorStatus", "MirrorWorkers",
           "SendFailure", "TopicStatus", "new_mirror", "parse_num_streams", "parse_renames"]
