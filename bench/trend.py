"""`make bench` over time: a row per run of bench/results/history.jsonl, headline keys as columns.

Every full `make bench` (bench/run_all.py without `--smoke`) appends its JSON
summary to bench/results/history.jsonl as one line, with the commit it
measured (`-dirty` when tracked files differed from it), the UTC date and the
machine's cores and load average at the start. Lines with `"source": "docs"`
were taken from the figures docs/benchmarks.md recorded before the file
existed; the others were appended by runs.

Usage:
  .venv/bin/python bench/trend.py                                  # the committed history
  .venv/bin/python bench/trend.py --keys pg_create_ratio,pg_create_p99_ms
  .venv/bin/python bench/trend.py path/to/history.jsonl --keys all # every figure key found
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HISTORY = ROOT / "bench" / "results" / "history.jsonl"

# The targets' keys first (creates and checks as production sends them, an
# Idempotency-Key on every POST), the same without the header, then the end to
# end and webhooks figures that put them in context.
HEADLINE = (
    "sqlite_create_ratio",
    "sqlite_check_ratio",
    "sqlite_create_p99_ms",
    "pg_create_ratio",
    "pg_check_ratio",
    "pg_create_p99_ms",
    "bare_sqlite_create_ratio",
    "bare_sqlite_check_ratio",
    "bare_sqlite_create_p99_ms",
    "bare_pg_create_ratio",
    "bare_pg_check_ratio",
    "bare_pg_create_p99_ms",
    "send_api_msgs_per_s",
    "send_api_pg_msgs_per_s",
    "verify_e2e_per_s",
    "verify_e2e_pg_per_s",
    "send_api_kannel_ratio",
    "webhooks_floor_ratio",
)
# The create and check figures bench/verify_bench.py measures in two request
# shapes: `KEY` with an Idempotency-Key on every POST, `bare_KEY` without.
SHAPED = tuple(
    f"{db}_{call}_{figure}"
    for db in ("sqlite", "pg")
    for call in ("create", "check")
    for figure in ("ratio", "rps", "floor_rps", "p99_ms")
)
# Facts about a run rather than figures: shown in the leading columns or not at all.
RUN_FACTS = {
    "date",
    "commit",
    "source",
    "machine",
    "seconds",
    "errors",
    "parts",
    "started_at",
    "smoke",
    "note",
}


def commit_of(root: Path = ROOT) -> str:
    """`git rev-parse --short HEAD`, with `-dirty` if a tracked file differs from it.

    bench/results is left out of the comparison: a run appends to the history
    there, and a figure does not depend on the figures before it.
    """

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git(
        "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/results"
    )
    return f"{commit}-dirty" if changed else commit


def machine() -> dict[str, Any]:
    """What the figures depend on besides the code: cores, load at the start, CPU, Python."""
    return {
        "cores": os.cpu_count(),
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "cpu": cpu_model(),
        "python": platform.python_version(),
    }


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def record(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The history line of one run: run_all.py's summary with its date and commit up front."""
    machine_facts = dict(summary.get("machine") or {})
    line: dict[str, Any] = {
        "date": str(summary["started_at"]).replace("+00:00", "Z"),
        "commit": machine_facts.pop("commit", None) or commit_of(),
        "source": "make bench",
        "machine": machine_facts,
    }
    line.update((k, v) for k, v in summary.items() if k not in {"started_at", "machine", "smoke"})
    return line


def append(path: Path, line: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as history:
        history.write(json.dumps(line, ensure_ascii=False, sort_keys=False) + "\n")


def load(path: Path) -> list[dict[str, Any]]:
    """Every run in the file, oldest first, its figures under the names they have
    today (`in_shapes`); a line that is not a JSON object is an error."""
    runs: list[dict[str, Any]] = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not text.strip():
            continue
        run = json.loads(text)
        if not isinstance(run, dict):
            raise ValueError(f"{path}:{number}: not a JSON object")
        runs.append(in_shapes(run))
    return sorted(runs, key=lambda run: str(run.get("date", "")))


def in_shapes(run: Mapping[str, Any]) -> dict[str, Any]:
    """A run's figures with each create and check figure under its shape's name.

    A run that carries none of the `bare_` keys measured creates and checks
    without an Idempotency-Key only, under the names the keyed shape has since:
    its figures are the bare shape's and move to `bare_KEY`, so that a column
    never mixes the two shapes.
    """
    if any(f"bare_{key}" in run for key in SHAPED):
        return dict(run)
    return {f"bare_{key}" if key in SHAPED else key: value for key, value in run.items()}


def figure_keys(runs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every numeric key any run carries, in the order first met."""
    found: dict[str, None] = {}
    for run in runs:
        for key, value in run.items():
            if key not in RUN_FACTS and isinstance(value, int | float):
                found.setdefault(key)
    return list(found)


def shown(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-" if value is None else str(value)
    if abs(value) < 10:
        return f"{value:,.2f}"
    return f"{value:,.1f}" if abs(value) < 100 else f"{value:,.0f}"


def when(date: Any) -> str:
    """An ISO date in UTC as `YYYY-MM-DD HH:MM`: minutes are what a run's date is worth."""
    text = str(date or "-")
    return text[:16].replace("T", " ") if len(text) >= 16 and text[10] == "T" else text


def render(runs: Sequence[Mapping[str, Any]], keys: Sequence[str] = HEADLINE) -> str:
    """A Markdown table: date, commit, load at the start, source, then one column per key."""
    header = ["date (UTC)", "commit", "load", "source", *keys]
    rows = [header]
    for run in runs:
        load_average = (run.get("machine") or {}).get("load_average") or [None]
        rows.append(
            [
                when(run.get("date")),
                str(run.get("commit", "-")),
                shown(load_average[0]),
                "docs" if run.get("source") == "docs" else "run",
                *(shown(run.get(key)) for key in keys),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        padded = (cell.ljust(w) if i < 4 else cell.rjust(w) for i, (cell, w) in pairs)
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows[1:])])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("history", nargs="?", type=Path, default=HISTORY)
    parser.add_argument(
        "--keys",
        help=f"comma-separated figure keys, or 'all' (default: {','.join(HEADLINE)})",
    )
    args = parser.parse_args(argv)
    runs = load(args.history)
    if args.keys == "all":
        keys = figure_keys(runs)
    elif args.keys:
        keys = [key.strip() for key in args.keys.split(",") if key.strip()]
    else:
        keys = list(HEADLINE)
    print(render(runs, keys))


if __name__ == "__main__":
    main()
