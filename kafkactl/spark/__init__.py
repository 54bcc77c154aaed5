"""Apache Spark integration: the `kafkactl` PySpark data source and the parallel loader job.

`kafkactl.spark.source` registers the data source (importing it needs pyspark); the option
parsing and the offset planning below it are plain Python over `kafkactl.client`, so they
run (and are tested) without Spark too.
"""
