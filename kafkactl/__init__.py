"""kafkactl: Apache Kafka's design rebuilt in Python, as one CLI toolkit with a broker mode."""

# The one place the version is written: pyproject.toml reads it from here (setuptools
# `attr:`), so `kafkactl --version` and the installed distribution cannot disagree, and
# start-up does not pay for importlib.metadata.
__version__ = "0.1.0"
