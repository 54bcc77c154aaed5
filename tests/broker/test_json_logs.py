"""`serve --log-format json`: every line the broker writes is one JSON object (time, level,
logger, message), and a line written while a request is handled names that request."""

from __future__ import annotations

import json
from typing import Any

from tests import zygote
from tests.polling import wait_until


def test_json_lines_with_the_request(broker_factory: Any) -> None:
    b = broker_factory(extra_args=["--log-format", "json"])
    r = zygote.run(["topics", "create", "-t", "logged", "-b", b.bootstrap], text=True,
                   timeout=60)
    assert r.returncode == 0, r.stderr

    def lines() -> list[dict[str, Any]]:
        return [json.loads(line) for line in b.log().splitlines() if line.strip()]

    created = wait_until(lambda: [x for x in lines() if "created topic logged" in x["message"]],
                         30, "the topic's creation logged")
    assert created[0]["request"]["api"] == "CreateTopics"
    assert created[0]["request"]["client_id"] == "kafkactl-admin"
    assert created[0]["request"]["peer"].startswith("127.0.0.1:")
    assert b.stop() == 0
    every = lines()  # each line parses (json.loads above), and has the four fields
    assert every and all({"time", "level", "logger", "message"} <= x.keys() for x in every)
    assert all(x["time"].endswith("Z") for x in every)
    started = [x for x in every if "started" in x["message"]]
    assert started and "request" not in started[0]  # no request: no request field


def test_bad_log_format_is_refused(tmp_path: Any) -> None:
    r = zygote.run(["serve", "-d", str(tmp_path / "d"), "--log-format", "xml"], text=True,
                   timeout=60)
    assert r.returncode == 2 and "--log-format" in r.stderr
