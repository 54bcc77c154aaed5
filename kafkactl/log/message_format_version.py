"""`message.format.version` / `log.message.format.version` values as Kafka 3.x takes them.

Kafka reads the value with MetadataVersion.fromVersionString: a version that starts with
"0." keeps its first three dot-separated parts, any other its first two, and the rest must
name a release Kafka knows (`0.10.0`, `2.8`) or one of its inter-broker protocol steps
(`0.10.0-IV1`, `3.0-IV1`). So `0.10.0.0`, `0.10.2.1` and `2.8.1` are all accepted. Since
Kafka 3.0 (KIP-724) the setting is deprecated and ignored: the brokers write the v2 format
whatever it says; it is kept (and described) as given.
"""

from __future__ import annotations

import re

# The releases Kafka 3.x accepts as message format / inter-broker protocol versions.
RELEASES = frozenset({
    "0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0", "0.10.1", "0.10.2", "0.11.0",
    "1.0", "1.1", "2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8",
    "3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "3.9",
})
_STEP = re.compile(r"^(?P<release>.+)-IV\d+$")


def message_format_version(value: str) -> str:
    """`value` (stripped) when Kafka 3.x accepts it, else ValueError saying what is
    accepted."""
    text = str(value).strip()
    parts = text.split(".")
    keep = 3 if text.startswith("0.") else 2
    key = text if keep >= len(parts) else ".".join(parts[:keep])
    step = _STEP.match(key)
    release = step.group("release") if step else key
    if release not in RELEASES:
        raise ValueError(f"Version {text} is not a valid version: use a Kafka release such "
                         "as 0.10.0, 0.11.0, 2.8 or 3.0 (0.10.0.0 and 3.0-IV1 work too)")
    return text
