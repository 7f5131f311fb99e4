"""The repository describes the product as it is: no file tells when something was
done, and every link in the documentation leads to a file that exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SESSION = "sess" + "ion"  # spelled apart so this file does not match its own pattern
ORDINALS = (
    "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
    "|this|last|earlier|next|previous"
)
# A round of work named by its place or number, an issue by its number, or a change
# told as news.
HISTORY = re.compile(
    rf"({ORDINALS}) {SESSION}|iss{'ue'} [0-9]+|{SESSION} [0-9]+|{SESSION}s ago"
    rf"|before this chan{'ge'}|was chan{'ged'}|\bwe n{'ow'}\b",
    re.IGNORECASE,
)
# Figures with their own history (rewritten apart), and the console, where a session
# is a sign-in.
EXEMPT = (
    re.compile(r"docs/benchmarks[^/]*\.md"),
    re.compile(r"docs/benchmarks/[^/]+\.md"),
    re.compile(r"src/relay/web/console/.*"),
)

# [text](target) and ![alt](target), with an optional title; and [label]: target.
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def tracked_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [name for name in listed.split("\0") if name]


def history_lines(name: str, text: str) -> list[str]:
    return [
        f"{name}:{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if HISTORY.search(line)
    ]


def link_targets(text: str) -> list[str]:
    """The link targets of a markdown text, outside fenced code blocks."""
    targets: list[str] = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        unquoted = re.sub(r"`[^`]*`", "", line)
        targets.extend(INLINE_LINK.findall(unquoted))
        targets.extend(REFERENCE_LINK.findall(unquoted))
    return targets


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for target in link_targets(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
            continue  # another site, mail, or a place on the same page
        path = target.split("#", 1)[0].split("?", 1)[0]
        if not (page.parent / path).exists():
            broken.append(f"{page.relative_to(root)}: {target}")
    return broken


def test_no_tracked_file_tells_the_history_of_the_work() -> None:
    offenders = []
    for name in tracked_files():
        path = ROOT / name
        if any(rule.fullmatch(name) for rule in EXEMPT) or not path.is_file():
            continue
        content = path.read_bytes()
        if b"\0" in content:
            continue  # an image or another binary file
        offenders.extend(history_lines(name, content.decode("utf-8", errors="replace")))
    assert offenders == []


def test_every_relative_link_in_the_docs_leads_to_a_file() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    assert len(pages) > 2
    broken = [link for page in pages for link in broken_links(page)]
    assert broken == []


def test_the_history_pattern_catches_a_round_of_work_or_an_issue() -> None:
    for told in (
        f"Measured in the tenth {SESSION}.",
        f"As asked in iss{'ue'} 16, item 4.",
        f"Since {SESSION} 3 the writer batches.",
        f"The index was chan{'ged'} to a partial one.",
    ):
        assert history_lines("README.md", told), told
    for plain in (
        f"The console {SESSION} is a signed cookie.",
        "A round trip to the database.",
        "An issue with a carrier is reported as carrier_unavailable.",
    ):
        assert not history_lines("README.md", plain), plain


def test_a_link_to_a_missing_file_is_found(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "decisions").mkdir(parents=True)
    (docs / "limits.md").write_text("# Limits\n")
    (docs / "decisions" / "README.md").write_text("# Decisions\n")
    page = docs / "api.md"
    page.write_text(
        "See [limits](limits.md#idempotency-key), [the API](https://example.com/x.md),\n"
        "[here](#top), ![a picture](console/missing.png) and [gone](no-such-page.md).\n"
        "```\n[not a link](inside-a-fence.md)\n```\n"
        "`[quoted](in-code.md)` is code too.\n"
        "[ref]: decisions/README.md\n"
        "[old]: missing/README.md\n"
    )
    assert broken_links(page, tmp_path) == [
        "docs/api.md: console/missing.png",
        "docs/api.md: no-such-page.md",
        "docs/api.md: missing/README.md",
    ]
