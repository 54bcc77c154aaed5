"""Fetch codecs: the compiled twins against the generated codecs (issue 33), in this
process, on what the broker decodes and encodes once per fetch:

- consumer   a consumer's one-partition fetch (librdkafka v11, Java/confluent v12,
             kafka-python v10), and its answer (one FileRegion of records);
- follower   kafkactl's replica fetcher (FETCH_VERSION 12): 50 partitions in 5 topics,
             and the leader's answer (50 FileRegions).

Each case is run `--calls` times per sample by each codec, alternating which goes first,
`--rounds` samples each; it prints the best and median per call and the ratio of the
medians (generated / compiled). The machine is shared: read the medians, not one run.

    python bench/fetch_codec.py [--rounds 21] [--calls 2000]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from typing import Any


def consumer(version: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "orders", "partitions": [
                {"partition": 0, "current_leader_epoch": 3, "fetch_offset": 123456,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1048576}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def follower(partitions: int = 50, topics: int = 5) -> dict[str, Any]:
    per = partitions // topics
    return {"replica_id": 2, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 10485760,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": f"topic-{t}", "partitions": [
                {"partition": p, "current_leader_epoch": 7, "fetch_offset": 10**6 + p,
                 "last_fetched_epoch": 7, "log_start_offset": 0,
                 "partition_max_bytes": 1048576} for p in range(per)]}
                for t in range(topics)],
            "forgotten_topics_data": [], "rack_id": ""}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """What handlers/fetch.py answers to `request`: a FileRegion per partition."""
    from kafkactl.protocol.types import FileRegion

    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": t["topic"], "partitions": [
            {"partition_index": p["partition"], "error_code": 0,
             "high_watermark": p["fetch_offset"] + 100,
             "last_stable_offset": p["fetch_offset"] + 100, "log_start_offset": 0,
             "aborted_transactions": None, "preferred_read_replica": -1,
             "records": FileRegion(40, p["fetch_offset"] * 10, 65536)}
            for p in t["partitions"]]} for t in request["topics"]]}


def sample(call: Callable[[], Any], calls: int) -> float:
    """Microseconds per call over `calls` calls."""
    t = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - t) / calls * 1e6


def compare(label: str, reference: Callable[[], Any], compiled: Callable[[], Any],
            rounds: int, calls: int) -> None:
    ref_us: list[float] = []
    twin_us: list[float] = []
    for i in range(rounds):
        order = ((reference, ref_us), (compiled, twin_us))
        for call, out in order if i % 2 == 0 else order[::-1]:
            out.append(sample(call, calls))
    ref, twin = statistics.median(ref_us), statistics.median(twin_us)
    print(f"  {label:<48} generated best {min(ref_us):7.2f} us median {ref:7.2f} us | "
          f"compiled best {min(twin_us):6.2f} us median {twin:6.2f} us | ratio {ref / twin:4.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()

    from kafkactl.protocol import codec
    from kafkactl.protocol.api_keys import ApiKey
    from kafkactl.protocol.kernels import REASON, codec_kernels

    if codec_kernels is None:
        raise SystemExit(f"the compiled kernels are not in use ({REASON}): nothing to compare")
    cases = [("consumer, 1 partition, librdkafka", 11, consumer(11), "rdkafka"),
             ("consumer, 1 partition, Java", 12, consumer(12), "consumer-1"),
             ("consumer, 1 partition, kafka-python", 10, consumer(10), "kafka-python-2.0"),
             ("follower, 50 partitions", 12, follower(), "broker-2-fetcher")]
    print(f"Fetch codecs, {args.rounds} alternating samples of {args.calls} calls; per call")
    for label, version, body, client_id in cases:
        frame = codec.encode_request(ApiKey.FETCH, version, 1, client_id, body)[4:]
        reference = codec.request_frame_decoder_py(ApiKey.FETCH, version)
        compiled = codec.request_frame_decoder(ApiKey.FETCH, version)
        if compiled(frame) != reference(frame) or \
                codec_kernels.decode_fetch_frame(frame, version) is None:
            raise AssertionError(f"{label}: the twin does not answer the reference's result")
        compare(f"decode v{version} {label}", functools.partial(reference, frame),
                functools.partial(compiled, frame), args.rounds, args.calls)
    for label, version, body, _client_id in cases:
        response = answer(body)
        encode_ref = codec.response_encoder_py(ApiKey.FETCH, version)
        encode = codec.response_encoder(ApiKey.FETCH, version)
        twin = codec_kernels.encode_fetch_response(1, version, response)
        if twin is None or twin != encode_ref(1, response):
            raise AssertionError(f"{label}: the twin does not give the reference's parts")
        compare(f"encode v{version} {label}", functools.partial(encode_ref, 1, response),
                functools.partial(encode, 1, response), args.rounds, args.calls)


if __name__ == "__main__":
    main()
