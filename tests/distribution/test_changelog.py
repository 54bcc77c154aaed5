"""CHANGELOG.md stays release notes in Keep a Changelog 1.1.0's shape
(https://keepachangelog.com/en/1.1.0/): a title, `## [Unreleased]` first, then released
versions newest first (`## [1.2.0] - 2026-01-31`), each with only the six standard
sections, and under them one-line entries a user reads. Measurements belong in the
README's Performance section and bench/ output; test and CI notes in git log."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"

SECTIONS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
MAX_LINE = 160
RELEASE = re.compile(r"^## \[(?P<version>\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?)\]"
                     r" - (?P<date>\d{4}-\d{2}-\d{2})$")
LINK_REFERENCE = re.compile(r"^\[[^\]]+\]: \S+$")
# what a development log says and release notes do not: test and CI internals
NOT_FOR_USERS = re.compile(r"\btests/|\.ci/|\bpytest\b|\bxdist\b|\bCI\b")


@dataclass
class Release:
    title: str
    line: int
    sections: dict[str, list[tuple[int, str]]] = field(default_factory=dict)


Parsed = tuple[list[str], list[Release], list[str]]


def parse(text: str) -> Parsed:
    """(the lines before the first release, the releases, problems found on the way)."""
    preamble: list[str] = []
    releases: list[Release] = []
    problems: list[str] = []
    section: list[tuple[int, str]] | None = None
    in_links = False
    for n, line in enumerate(text.splitlines(), 1):
        where = f"CHANGELOG.md:{n}"
        if len(line) > MAX_LINE:
            problems.append(f"{where}: {len(line)} characters (at most {MAX_LINE}): {line[:60]}...")
        if line != line.rstrip():
            problems.append(f"{where}: trailing whitespace")
        if line.startswith("## "):
            if in_links:
                problems.append(f"{where}: a release after the link references")
            releases.append(Release(line[3:], n))
            section = None
        elif not releases:
            preamble.append(line)
        elif not line.strip():
            continue
        elif LINK_REFERENCE.match(line):
            in_links = True
        elif in_links:
            problems.append(f"{where}: only link references may follow them: {line!r}")
        elif line.startswith("### "):
            name = line[4:]
            if name not in SECTIONS:
                problems.append(f"{where}: section {name!r} is not one of {', '.join(SECTIONS)}")
            if name in releases[-1].sections:
                problems.append(f"{where}: a second {name!r} section in {releases[-1].title}")
            section = releases[-1].sections.setdefault(name, [])
        elif line.startswith("- "):
            if section is None:
                problems.append(f"{where}: an entry outside a section: {line!r}")
            else:
                section.append((n, line))
        else:
            problems.append(f"{where}: not a heading or a one-line entry starting with '- ' "
                            f"(entries are one line each): {line!r}")
    return preamble, releases, problems


@pytest.fixture(scope="module")
def changelog() -> Parsed:
    return parse(CHANGELOG.read_text(encoding="utf-8"))


def test_lines_are_headings_or_one_line_entries(changelog: Parsed) -> None:
    assert changelog[2] == []


def test_title_and_format_note(changelog: Parsed) -> None:
    preamble = changelog[0]
    assert preamble and preamble[0] == "# Changelog"
    assert "https://keepachangelog.com/en/1.1.0/" in "\n".join(preamble)
    assert not any(line.startswith(("#", "- ")) for line in preamble[1:]), \
        "entries go under a release's section, not before the first release"


def test_unreleased_first_then_versions_newest_first(changelog: Parsed) -> None:
    releases = changelog[1]
    assert releases and releases[0].title == "[Unreleased]", "the first release is ## [Unreleased]"
    versions = []
    for release in releases[1:]:
        match = RELEASE.match("## " + release.title)
        assert match, \
            f"CHANGELOG.md:{release.line}: want '## [X.Y.Z] - YYYY-MM-DD', not {release.title!r}"
        core = match["version"].split("-")[0].split("+")[0]
        versions.append((tuple(int(p) for p in core.split(".")), match["date"], release.line))
    for newer, older in zip(versions, versions[1:], strict=False):
        assert newer[0] > older[0] and newer[1] >= older[1], \
            f"CHANGELOG.md:{older[2]}: releases go newest first"


def test_sections_in_order_and_not_empty(changelog: Parsed) -> None:
    for release in changelog[1]:
        names = list(release.sections)
        assert names == [s for s in SECTIONS if s in names], \
            f"{release.title}: sections in Keep a Changelog's order {SECTIONS}, not {names}"
        for name, entries in release.sections.items():
            assert entries, f"{release.title}: the {name!r} section is empty (leave it out)"
    assert any(release.sections for release in changelog[1]), "no entries at all"


def test_entries_are_for_users(changelog: Parsed) -> None:
    """No test-suite or CI notes, and no entry twice in one release."""
    for release in changelog[1]:
        seen: dict[str, int] = {}
        for entries in release.sections.values():
            for n, entry in entries:
                assert not NOT_FOR_USERS.search(entry), \
                    f"CHANGELOG.md:{n}: test or CI notes are not release notes: {entry!r}"
                assert len(entry) > len("- ") + 10, f"CHANGELOG.md:{n}: an empty entry"
                assert entry not in seen, \
                    f"CHANGELOG.md:{n}: the same entry as line {seen.get(entry)}"
                seen[entry] = n


@pytest.mark.parametrize("text, problem", [
    ("# Changelog\n\n## [Unreleased]\n\n### Added\n- a thing that works now\n  and more\n",
     "not a heading or a one-line entry"),
    ("# Changelog\n\n## [Unreleased]\n\n### Improvements\n- a thing that works now\n",
     "is not one of"),
    ("# Changelog\n\n## [Unreleased]\n\n### Added\n- " + "x" * 200 + "\n", "characters (at most"),
    ("# Changelog\n\n## [Unreleased]\n- a thing that works now\n", "an entry outside a section"),
    ("# Changelog\n\n## [Unreleased]\n\n### Fixed\n- a\n\n### Fixed\n- b\n", "a second 'Fixed'"),
])
def test_the_checks_catch_a_development_log(text: str, problem: str) -> None:
    assert any(problem in p for p in parse(text)[2])
