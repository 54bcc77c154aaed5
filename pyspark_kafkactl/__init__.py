"""Spark's discovery of the `kafkactl` data source (SPARK-45917).

Spark 4 imports every top-level module named `pyspark_*` that the Python running its
workers can import, and registers the `DefaultSource` it finds under `DefaultSource.name()`.
Installing kafkactl (`pip install 'kafkactl[spark]'`) installs this package next to it, so
`spark.read.format("kafkactl")` works in any new SparkSession without a `register(spark)`
call, when the workers' Python is the one kafkactl is installed in (an activated virtual
environment, or PYSPARK_PYTHON / spark.pyspark.python naming it).

Importing this module needs pyspark: only Spark's workers import it.
"""

from kafkactl.spark.source import KafkactlDataSource as DefaultSource

__all__ = ["DefaultSource"]
