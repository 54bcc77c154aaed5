"""Options for the JVMs the tests start (tests/conftest.py re-exports them)."""

from __future__ import annotations

# JVM options for the short-lived JVMs the tests start (ZooKeeper, Spark): the C1 compiler
# only, the serial collector, and no bytecode verification of the (packaged, trusted) jars.
# A JVM that lives seconds spends most of its CPU in C2, GC threads and loading classes;
# these halve it (ZooKeeper 1.35 -> 0.7 CPU-s to start and serve a test, a SparkSession
# with a small job 15 -> 7.2). One compiler thread instead of the 2-3 the JVM picks: less
# gets compiled in a short life (a SparkSession running 15 small jobs: 16.2 -> 14.6 CPU-s,
# the mean of 5 alternating runs each; compiler threads were a quarter of its CPU; the
# whole suite, 2 alternating runs each: 462 -> 425 CPU-s, 251 -> 232 s).
# Benchmarks keep the JVM's defaults.
TEST_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=1", "-XX:+UseSerialGC",
                    "-XX:+UnlockDiagnosticVMOptions", "-XX:-BytecodeVerificationRemote")

__all__ = ["TEST_JVM_OPTIONS"]
