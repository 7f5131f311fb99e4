"""What metrics add to one create, timed alone: the calls a create makes, in a loop.

A create counts one HTTP request (counter and histogram), one verification,
one SMS attempt and one receipt, the last three through after-commit
callbacks. Timing those calls alone, best of several rounds, gives a figure
that the noise of a shared machine does not swamp, to set beside the CPU per
create of `bench/in_process.py` (run that with and without `--no-metrics` too).

Usage:
  .venv/bin/python bench/metrics_cost.py                 # metrics kept in this process
  PROMETHEUS_MULTIPROC_DIR=$(mktemp -d) .venv/bin/python bench/metrics_cost.py
      # as `relay serve --workers N` keeps them: values in files shared between processes
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from relay.ids import new_id  # noqa: E402
from relay.metrics import observe  # noqa: E402


class _Tx:
    """Runs after-commit callbacks at once, as the writer does after its COMMIT."""

    def after_commit(self, callback: Callable[[], None]) -> None:
        callback()


def one_create(tx: _Tx, attempt_id: str) -> None:
    observe.verification_created(tx, livemode=False)
    observe.sms_receipt(tx, carrier="sandbox", attempt_id=attempt_id)
    observe.sms_attempt(tx, carrier="sandbox", country="US", outcome="delivered")
    observe.http_request("/v1/verifications", "POST", 200, 0.001)


def main() -> None:
    tx, attempt_id = _Tx(), new_id("att")
    calls, rounds = 20_000, 7
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(calls):
            one_create(tx, attempt_id)
        best = min(best, (time.process_time() - started) / calls * 1e6)
    mode = "multiprocess (files)" if os.environ.get("PROMETHEUS_MULTIPROC_DIR") else "in-process"
    print(f"metrics per create, {mode}: {best:.1f} µs CPU (best of {rounds} x {calls:,})")


if __name__ == "__main__":
    main()
