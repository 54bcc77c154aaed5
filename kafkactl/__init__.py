"""kafkactl: Apache Kafka's design rebuilt in Python, as one CLI toolkit with a broker mode."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kafkactl")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.1.0"
