"""Apache Spark integration: the `kafkactl` PySpark data source and the parallel loader job.

`kafkactl.spark.source` is the data source (importing it needs pyspark); Spark 4 finds it
through the top-level `pyspark_kafkactl` package installed with kafkactl. The option parsing
and the offset planning below it are plain Python over `kafkactl.client`, so they run (and
are tested) without Spark too.
"""
