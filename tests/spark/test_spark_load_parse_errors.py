"""`kafkactl spark-load`'s argument errors found while its arguments are parsed (click's
usage errors, the shared -b / --command-config / $KAFKACTL_BOOTSTRAP checks) say
`kafkactl spark-load: error: ...`, as its own argument errors do; the other commands' lines
stay `error: ...`. Real CLI processes; nothing is refused late (no Spark, no broker)."""

from __future__ import annotations

import os
from pathlib import Path

from tests import zygote


def test_parse_errors_name_spark_load_and_only_it(tmp_path: Path) -> None:
    # no spark-submit at this SPARK_HOME: what is refused is refused before it would run
    env = dict(os.environ, SPARK_HOME=str(tmp_path / "no-spark"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("KAFKACTL_BOOTSTRAP", None)
    config = tmp_path / "client.properties"
    config.write_text("bootstrap.servers=foo\n")
    out = ["-o", str(tmp_path / "out")]
    usage = ["Usage: kafkactl spark-load [OPTIONS]", "Try 'kafkactl spark-load -h' for help.",
             ""]
    cases: list[tuple[list[str], dict[str, str], list[str], str]] = [
        (["-b", "24092", "-t", "ev", *out], {}, usage,
         "Invalid value for '--bootstrap-server' / '-b': '24092' has no host: expected "
         "host:port, e.g. 127.0.0.1:24092"),
        (["-t", "ev", *out, "--command-config", str(config)], {}, [],
         f"--command-config {config}: bootstrap.servers=foo: 'foo' has no port: expected "
         "host:port, e.g. foo:9092"),
        (["-t", "ev", *out], {"KAFKACTL_BOOTSTRAP": "zz"}, [],
         "KAFKACTL_BOOTSTRAP=zz: 'zz' has no port: expected host:port, e.g. zz:9092"),
        (["-b", "127.0.0.1:1", "-t", "ev"], {}, usage, "Missing option '--output' / '-o'."),
        (["-b", "127.0.0.1:1", "-t", "ev", *out, "--max-records-per-partition", "x"], {},
         usage, "Invalid value for '--max-records-per-partition': 'x' is not a valid int."),
    ]
    for args, more_env, before, reason in cases:
        r = zygote.run(["spark-load", *args], env=dict(env, **more_env), text=True,
                       timeout=60)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.splitlines() == [*before, f"kafkactl spark-load: error: {reason}"], \
            (args, r.stderr)

    # the same shared checks of another command: their lines as they were
    for args, more_env, last in (
            (["-b", "24092"], {}, "error: Invalid value for '--bootstrap-server' / '-b': "
                                  "'24092' has no host"),
            ([], {"KAFKACTL_BOOTSTRAP": "zz"}, "error: KAFKACTL_BOOTSTRAP=zz: 'zz' has no "
                                               "port")):
        r = zygote.run(["consume", "-t", "ev", *args], env=dict(env, **more_env), text=True,
                       timeout=60)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.splitlines()[-1].startswith(last), (args, r.stderr)
        assert "spark-load" not in r.stderr, (args, r.stderr)
