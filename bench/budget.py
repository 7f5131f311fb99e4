"""The request path's budget: instructions per operation, counted under callgrind, against
`bench/budget.toml`.

Counts keyed create, wrong check, approving check, retrieve, list page and Send
API message through the real app in process (`bench/budget_workload.py` says
how, and what is kept out so the counts repeat run to run), and the reference
floor's create and check beside them. Prints one table; exits 1 when an
operation exceeds its budget by more than the file's `tolerance`, or has none.
Instructions, not time: the same on a loaded machine as on a quiet one, so CI
holds the line (`.ci/run`, `make budget`). About a minute on 2 busy cores.

Raising a budget needs a decision record naming what the instructions buy;
lowering one is welcome (`--write` sets every budget to the count just made,
rounded up to three significant figures, with the commit and the date).

Usage:
  .venv/bin/python bench/budget.py            # make budget
  .venv/bin/python bench/budget.py --write    # re-measure: the budgets become this count
  .venv/bin/python bench/budget.py --calls 20 --budget /tmp/other.toml
  .venv/bin/python bench/budget.py --keep /tmp/counted  # callgrind's files kept, one per
      # operation, for `callgrind_annotate --inclusive=yes /tmp/counted/callgrind.out.N`
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.budget_workload import FLOOR, OPERATIONS  # noqa: E402
from bench.callgrind_marks import command, totals  # noqa: E402
from bench.trend import commit_of  # noqa: E402

import relay  # noqa: E402

BUDGET = ROOT / "bench" / "budget.toml"
WORKLOAD = ROOT / "bench" / "budget_workload.py"
# Relay's operation -> the floor's that does the same job.
FLOOR_OF = {
    "create": "floor_create",
    "wrong_check": "floor_check",
    "approving_check": "floor_check",
}


@dataclass(frozen=True)
class Entry:
    instructions: int
    commit: str
    date: str


@dataclass(frozen=True)
class Budget:
    tolerance: float
    calls: int
    warmup: int
    concurrency: int
    entries: dict[str, Entry]


@dataclass(frozen=True)
class Row:
    operation: str
    measured: float | None
    budget: int | None
    floor: float | None

    @property
    def ratio(self) -> float | None:
        if self.measured is None or self.budget is None:
            return None
        return self.measured / self.budget

    def over(self, tolerance: float) -> bool:
        """Over its budget by more than `tolerance`, or not both counted and budgeted."""
        return self.ratio is None or self.ratio > 1 + tolerance


def load(path: Path) -> Budget:
    data = tomllib.loads(path.read_text())
    entries = {
        name: Entry(int(table["instructions"]), str(table["commit"]), str(table["date"]))
        for name, table in data.items()
        if isinstance(table, dict)
    }
    return Budget(
        tolerance=float(data["tolerance"]),
        calls=int(data["calls"]),
        warmup=int(data["warmup"]),
        concurrency=int(data["concurrency"]),
        entries=entries,
    )


def rows(budget: Budget, measured: dict[str, float]) -> list[Row]:
    """One row per operation counted or budgeted, Relay's in the workload's order."""
    names = [*OPERATIONS, *sorted((set(budget.entries) | set(measured)) - set(OPERATIONS))]
    return [
        Row(
            name,
            measured.get(name),
            budget.entries[name].instructions if name in budget.entries else None,
            measured.get(FLOOR_OF.get(name, "")),
        )
        for name in names
        if name not in FLOOR
    ]


def render(found: list[Row], budget: Budget, measured: dict[str, float]) -> str:
    def number(value: float | None) -> str:
        return "—" if value is None else f"{value:,.0f}"

    lines = [
        "| operation | instructions per op | budget | ratio | floor per op | relay / floor |",
        "|---|---|---|---|---|---|",
    ]
    for row in found:
        ratio = "—" if row.ratio is None else f"{row.ratio:.3f}"
        times = "—"
        if row.measured is not None and row.floor:
            times = f"{row.measured / row.floor:.1f}"
        lines.append(
            f"| {row.operation} | {number(row.measured)} | {number(row.budget)} | {ratio}"
            f" | {number(row.floor)} | {times} |"
        )
    floor = ", ".join(f"{name} {measured[name]:,.0f}" for name in FLOOR if name in measured)
    lines.append(
        f"\n{budget.calls} counted calls of each, {budget.concurrency} in flight, after"
        f" {budget.warmup} uncounted; the floor: {floor or 'not counted'}"
    )
    return "\n".join(lines)


def verdict(found: list[Row], tolerance: float) -> list[str]:
    """What fails the budget, one line each; empty when every operation is within it."""
    failures = []
    for row in found:
        if row.measured is None:
            failures.append(f"{row.operation}: budgeted but not counted")
        elif row.budget is None:
            failures.append(f"{row.operation}: counted but has no budget in bench/budget.toml")
        elif row.over(tolerance):
            over = row.measured / row.budget - 1
            failures.append(
                f"{row.operation}: {row.measured:,.0f} instructions per op, over its budget"
                f" of {row.budget:,} by {over:.1%} (more than {tolerance:.0%})"
            )
    return failures


def count(budget: Budget, keep: Path | None = None) -> dict[str, float]:
    """Instructions per call of each operation, Relay's and the floor's; callgrind's
    files left in `keep` when given."""
    with tempfile.TemporaryDirectory(prefix="relay-budget-") as tmp:
        out = Path(tmp) if keep is None else keep
        out.mkdir(parents=True, exist_ok=True)
        args = ["--calls", str(budget.calls), "--warmup", str(budget.warmup)]
        args += ["--concurrency", str(budget.concurrency), "--out", str(out)]
        # Hashes seeded: set and dict orders, and with them the work, the same each run.
        # No RELAY_ setting or other variable of the caller's reaches the counted process.
        # PYTHONPATH passes: it names the tree measured (docs/benchmarks.md, before and after).
        kept = ("PATH", "HOME", "PYTHONPATH")
        env = {name: os.environ[name] for name in kept if name in os.environ}
        env |= {"PYTHONHASHSEED": "0", "LC_ALL": "C.UTF-8"}
        with (out / "workload.log").open("w") as log:
            argv = command(out, str(WORKLOAD), *args)
            done = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
        if done.returncode != 0:
            tail = (out / "workload.log").read_text()[-3000:]
            raise SystemExit(f"the counted run failed ({done.returncode}):\n{tail}")
        return {name: total / budget.calls for name, total in totals(out).items()}


def rounded_up(value: float) -> int:
    """To three significant figures, upwards: at most 1 % above `value`."""
    step = 10 ** max(0, math.floor(math.log10(value)) - 2)
    return math.ceil(value / step) * step


def write(path: Path, measured: dict[str, float], commit: str, date: str) -> list[str]:
    """Each operation's `instructions`, `commit` and `date` set to this count, in place
    (comments kept). Returns the operations whose budget went up."""
    raised, section, lines = [], "", []
    old = load(path).entries
    for line in path.read_text().splitlines():
        header = re.fullmatch(r"\[(\w+)\]\s*", line)
        if header:
            section = header.group(1)
        elif section in measured and (key := re.match(r"(instructions|commit|date) =", line)):
            value = rounded_up(measured[section])
            if key.group(1) == "instructions" and section in old:
                raised += [section] if value > old[section].instructions else []
            line = {
                "instructions": f"instructions = {value:_}",
                "commit": f'commit = "{commit}"',
                "date": f'date = "{date}"',
            }[key.group(1)]
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    return raised


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--budget", type=Path, default=BUDGET)
    parser.add_argument("--calls", type=int, help="counted calls of each (default: the file's)")
    parser.add_argument("--write", action="store_true", help="set the budgets to this count")
    parser.add_argument("--keep", type=Path, help="leave callgrind's files in this directory")
    args = parser.parse_args()
    budget = load(args.budget)
    if args.calls:
        budget = Budget(**{**budget.__dict__, "calls": args.calls})
    print(f"relay from {Path(relay.__file__).parent}", flush=True)
    measured = count(budget, args.keep)
    found = rows(budget, measured)
    print(render(found, budget, measured))
    if args.write:
        date = datetime.now(UTC).strftime("%Y-%m-%d")
        raised = write(args.budget, measured, commit_of(ROOT), date)
        print(f"\nwritten to {args.budget}")
        for name in raised:
            print(f"{name}: raised; that needs a decision record naming what it buys")
        return
    failures = verdict(found, budget.tolerance)
    for failure in failures:
        print(f"OVER BUDGET {failure}", file=sys.stderr)
    if failures:
        raise SystemExit(1)
    print(f"every operation within its budget (tolerance {budget.tolerance:.0%})")


if __name__ == "__main__":
    main()
