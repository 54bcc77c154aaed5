"""The check of a -t/--topic name every command that takes one makes before it connects:
Kafka's rule for a topic name (Topic.validate), told in words rather than as the
broker's INVALID_TOPIC_EXCEPTION."""

from __future__ import annotations

import re

from kafkactl.cli._client_options import fail, printable

# Kafka's rule for a topic name (Topic.validate): these characters, at most 249 of them,
# and neither "." nor ".."
TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
TOPIC_MAX_LENGTH = 249


def check_topic(topic: str, option: str = "-t/--topic") -> None:
    """Exit 2 for a topic name Kafka does not allow, before anything is read or sent."""
    if topic in ("", ".", ".."):
        why = "is empty" if not topic else f"may not be {topic!r}"
    elif len(topic) > TOPIC_MAX_LENGTH:
        why = f"is {len(topic)} characters long, more than {TOPIC_MAX_LENGTH}"
    elif not TOPIC_CHARS.fullmatch(topic):
        bad = sorted({c for c in topic if not TOPIC_CHARS.fullmatch(c)})
        why = ("has characters a topic name may not have: "
               + " ".join(f"'{printable(c)}'" for c in bad))
    else:
        return
    raise fail(f"{option} '{printable(topic)}': the name {why}; a topic name is "
               f"letters, digits, '.', '_' and '-' (at most {TOPIC_MAX_LENGTH})", 2)
