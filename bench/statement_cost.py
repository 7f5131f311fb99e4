"""Instructions per call of one Python statement, under callgrind.

What one piece of the request path costs alone (an id, a number's parse, a
record's construction), counted as `bench/budget.py` counts whole requests:
callgrind switched on only around the loop (`bench/callgrind_marks.py`), and
an empty loop of the same length subtracted. The statement runs once before,
uncounted. Run at module level: a name it uses costs a dict look-up, so
compare statements with each other, not with a function's inner steps.

Usage:
  .venv/bin/python bench/statement_cost.py SETUP STATEMENT [--calls 2000]
  .venv/bin/python bench/statement_cost.py "from relay.ids import new_id" "new_id('ver')"
  PYTHONPATH=/tmp/before/src .venv/bin/python bench/statement_cost.py ...   # another tree
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.callgrind_marks import Marks, command, totals  # noqa: E402


def counted(out: Path, setup: str, statement: str, calls: int) -> None:
    """In the process under callgrind: the empty loop, then the statement's, each marked."""
    marks = Marks.build(out)
    scope: dict[str, object] = {}
    exec(setup, scope)  # noqa: S102  # the caller's own code, as on its command line
    loop = compile(f"for _ in range({calls}):\n    {statement}\n", "<statement>", "exec")
    empty = compile(f"for _ in range({calls}):\n    pass\n", "<empty>", "exec")
    exec(loop, scope)  # noqa: S102  # once uncounted: imports, caches, specialisation
    marks.start()
    exec(empty, scope)  # noqa: S102
    marks.dump("empty")
    marks.start()
    exec(loop, scope)  # noqa: S102
    marks.dump("statement")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("setup")
    parser.add_argument("statement")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside is not None:
        counted(args.inside, args.setup, args.statement, args.calls)
        return
    with tempfile.TemporaryDirectory(prefix="relay-statement-") as tmp:
        out = Path(tmp)
        options = [args.setup, args.statement, "--calls", str(args.calls), "--inside", tmp]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(
            command(out, __file__, *options), env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SystemExit(done.stdout + done.stderr[-3000:])
        found = totals(out)
    per_call = (found["statement"] - found["empty"]) / args.calls
    print(f"{per_call:,.0f} instructions per call: {args.statement}")


if __name__ == "__main__":
    main()
