"""A clone of this repository is all a user has: nothing in it may reach beside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIBLING = "sha" + "red"  # spelled apart so this file does not match its own pattern
# A relative path out of the clone, or a path assembled from the sibling's name.
READS_BESIDE = re.compile(
    rf"\.\./{SIBLING}\b|[\"']{SIBLING}[\"']\s*/|/\s*[\"']{SIBLING}[\"']|parents\[[3-9]\]"
)
TEXT_SUFFIXES = {".py", ".sh", ".toml", ".cfg", ".ini", ".json", ".js", ".yml", ".yaml", ""}


def tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [ROOT / name for name in listed.split("\0") if name]


def test_no_file_reads_outside_the_clone() -> None:
    offenders = []
    for path in tracked_files():
        if path.suffix not in TEXT_SUFFIXES and path.name not in {"Makefile", "run"}:
            continue
        if not path.is_file() or path.stat().st_size > 1_000_000:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if READS_BESIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_the_pattern_catches_a_read_beside_the_clone() -> None:
    assert READS_BESIDE.search(f'REF = ROOT.parent / "{SIBLING}" / "bench"')
    assert READS_BESIDE.search(f"cat ../{SIBLING}/spec.md")
    assert not READS_BESIDE.search("a shared connection pool")


def test_vendored_files_the_tests_read_are_in_the_clone() -> None:
    for needed in (
        "tests/carriers/vendor/twilio/twilio_api_v2010.json",
        "tests/carriers/vendor/twilio/TWILIO-OAI-LICENSE",
        "bench/reference/app.py",
    ):
        assert (ROOT / needed).is_file(), needed
