"""super.users with an entry that is not principalType:principalName (`alice` for
`User:alice`) stops the broker at start, as Kafka's AclAuthorizer does ("expected a
string in format principalType:principalName but got alice"), instead of leaving the
user out of the super users without a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkactl.broker.security.authorizer import parse_super_users
from tests import zygote
from tests.conftest import free_port

AUTHORIZER = "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"


def _serve(tmp_path: Path, *overrides: str) -> list[str]:
    return ["serve", "--data-dir", str(tmp_path / "data"), "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
            *[a for o in overrides for a in ("--override", o)]]


def test_an_entry_without_its_type_stops_the_broker(tmp_path: Path) -> None:
    r = zygote.run(_serve(tmp_path, AUTHORIZER, "super.users=alice;User:bob"), text=True,
                   timeout=60)
    assert r.returncode != 0, r.stdout + r.stderr
    last = (r.stdout + r.stderr).strip().splitlines()[-1]
    assert "super.users=alice;User:bob" in last and \
        "expected a string in format principalType:principalName but got alice" in last, last
    assert "Traceback" not in r.stderr


def test_parse_super_users() -> None:
    assert parse_super_users(" User:a ; User:b;") == frozenset({"User:a", "User:b"})
    assert parse_super_users("") == frozenset()
    with pytest.raises(ValueError, match="but got bob"):
        parse_super_users("User:a;bob")
