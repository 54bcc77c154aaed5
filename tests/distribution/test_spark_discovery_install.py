"""The virtual environment the tests run in (scripts/venv.sh's install, the README's) lets
Spark 4 find the `kafkactl` data source by itself: Spark looks Python data sources up with
pkgutil.iter_modules() (top-level modules named pyspark_*, SPARK-45917), which does not see
modules an editable install's import hook provides (setuptools' default editable mode for
this flat layout). Cheap: one Python, no Spark."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# What Spark's lookup (pyspark.sql.worker.lookup_data_sources) does, in a fresh Python of
# this environment: every pyspark_* module iter_modules() lists, imported; the names of the
# DataSource subclasses they export as DefaultSource.
LOOKUP = """
import importlib, importlib.util, json, pkgutil, sys
found = {m.name: getattr(m.module_finder, "path", None) for m in pkgutil.iter_modules()
         if m.name.startswith("pyspark_")}
names = {}
if importlib.util.find_spec("pyspark") is not None:
    from pyspark.sql.datasource import DataSource
    for name in found:
        mod = importlib.import_module(name)
        source = getattr(mod, "DefaultSource", None)
        if isinstance(source, type) and issubclass(source, DataSource):
            names[source.name()] = name
kafkactl = importlib.util.find_spec("kafkactl")
print(json.dumps({"found": found, "names": names,
                  "kafkactl": kafkactl.origin if kafkactl else None}))
"""


def test_spark_finds_pyspark_kafkactl_in_this_environment(tmp_path: Path) -> None:
    # -I: neither PYTHONPATH nor the working directory (a checkout, where the package
    # would be found for the wrong reason) on sys.path, as for a user's own script
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run([sys.executable, "-I", "-c", LOOKUP], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert "pyspark_kafkactl" in got["found"], (
        f"pkgutil.iter_modules() of {sys.executable} lists no pyspark_kafkactl (it lists "
        f"{sorted(got['found'])}): Spark would not find the kafkactl data source by itself "
        "(DATA_SOURCE_NOT_FOUND without register(spark)). An editable install must be "
        "setuptools' editable_mode=compat, as scripts/venv.sh installs it: run "
        "./scripts/install.sh or ./scripts/test.sh again to reinstall")
    # the pyspark_kafkactl found is the one installed beside the kafkactl imported
    assert got["kafkactl"] is not None
    beside = Path(got["kafkactl"]).resolve().parent.parent
    assert Path(got["found"]["pyspark_kafkactl"]).resolve() == beside, got
    if importlib.util.find_spec("pyspark") is None:
        pytest.skip("pyspark is not installed: the module is found, its DataSource not checked")
    assert got["names"] == {"kafkactl": "pyspark_kafkactl"}, got
