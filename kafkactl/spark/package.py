"""kafkactl's own Python sources as one zip, for Spark executors that cannot import kafkactl
(`spark-submit --py-files`, `SparkContext.addPyFile`). No pyspark import."""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path


def package_zip(cache_dir: Path | None = None) -> Path:
    """The zip of kafkactl's sources (and pyspark_kafkactl's, when installed next to it),
    made once per content and kept in ${XDG_CACHE_HOME:-~/.cache}/kafkactl/."""
    pkg = Path(__file__).resolve().parent.parent
    roots = [pkg]
    discovery = pkg.parent / "pyspark_kafkactl"
    if (discovery / "__init__.py").exists():
        roots.append(discovery)
    files = sorted(p for root in roots for p in root.rglob("*.py")
                   if "__pycache__" not in p.parts)
    digest = hashlib.sha1()
    for p in files:
        digest.update(str(p.relative_to(pkg.parent)).encode())
        digest.update(p.read_bytes())
    base = cache_dir or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    out = base / "kafkactl" / f"kafkactl-{digest.hexdigest()[:16]}.zip"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for p in files:
                z.write(p, str(p.relative_to(pkg.parent)))
        os.replace(tmp, out)
    return out
