"""What `bench/budget.py` runs under callgrind: each budgeted operation, counted alone.

The production shape, as `bench/request_profile.py` measures it: the real app
(every middleware, the router, the services, the sandbox carrier) with a test
key over a fresh SQLite database, called in this process with `--concurrency`
requests in flight, an `Idempotency-Key` on every POST as relay-client sends
it; on asyncio's own loop and with a log line per request, as `relay serve`
runs it. Then the reference floor's create and check the same way.

Only the measured requests are counted (`bench/callgrind_marks.py`), and what
they do is the same in every run:

* a fixed number of calls per phase, in a fixed order, on a fresh database;
  every phase first runs `--warmup` calls uncounted (statement caches, lazy
  imports, the interpreter's specialised code), and the phases of the warm-up
  leave the database as the measured ones find it in every run;
* numbers and idempotency keys from counters, not drawn; hashing seeded
  (`PYTHONHASHSEED`, set by `bench/budget.py`);
* nothing on a timer: the background loops (expiry sweep, dispatch polling,
  webhook claims) are not started, and the WAL is checkpointed between phases
  instead of by the checkpoint thread every second. What those do in a window
  depends on its wall time, which under valgrind is the machine's load; their
  cost is per second, not per request;
* the collector off during a phase and one collection at its end, counted,
  with what was made before the phase frozen out of its view (as `relay serve`
  freezes its start-up objects): left to its thresholds, where a collection of
  the whole heap fell moved a phase's count by up to 15 %.

Run by `bench/budget.py`; alone it only prints its phases.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import itertools
import json
import os
import re
import sqlite3
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.callgrind_marks import Marks  # noqa: E402
from bench.in_process import REFERENCE, App, bench_settings, call  # noqa: E402

import relay.db.sqlite  # noqa: E402
from relay.db.migrate import upgrade  # noqa: E402
from relay.log import configure  # noqa: E402
from relay.services import build_services  # noqa: E402
from relay.web.app import create_app  # noqa: E402
from relay.worker.background import Background  # noqa: E402

# Relay's operations in the order they run, then the floor's.
OPERATIONS = ("create", "wrong_check", "approving_check", "retrieve", "list", "message")
FLOOR = ("floor_create", "floor_check")
# One digit longer than any code a verification is sent: never right, and not the
# test key's fixed code (000000, always right), so the verification stays pending.
WRONG_CODE = "1234567"
ID = re.compile(rb'"id":"(ver_[0-9A-Z]{26})"')


def numbers() -> Iterator[str]:
    """Distinct numbers (a repeat within 30 s would be refused as a resend too soon),
    the same in every run."""
    return (f"+1415{n}" for n in itertools.count(2_000_000))


def keys() -> Iterator[bytes]:
    """In relay-client's form (`rc_` and 32 hex digits), one per request, the same in
    every run."""
    return (f"rc_{n:032x}".encode() for n in itertools.count(1))


class Phases:
    """Runs each phase warm-up first, then counted; `concurrency` requests in flight."""

    def __init__(self, marks: Marks | None, warmup: int, calls: int, concurrency: int) -> None:
        self.marks, self.warmup, self.calls = marks, warmup, calls
        self.total = warmup + calls
        self.gate = asyncio.Semaphore(concurrency)
        self.settle: Callable[[], None] = lambda: None

    async def run(self, name: str, work: Callable[[int], Awaitable[None]]) -> None:
        """`work(i)`: the i-th call of the phase, the warm-up's first, then the counted."""
        for counted, calls in ((False, range(self.warmup)), (True, range(self.warmup, self.total))):
            self.settle()
            # The cycles a phase leaves are collected once, at its end (see the docstring).
            gc.collect()
            gc.freeze()
            gc.disable()
            if counted and self.marks is not None:
                self.marks.start()
            await asyncio.gather(*(self.gated(work(i)) for i in calls))
            gc.collect()
            if counted and self.marks is not None:
                self.marks.dump(name)
            gc.enable()
        print(f"{name}: {self.warmup} warm-up, {self.calls} counted", flush=True)

    async def gated(self, work: Awaitable[None]) -> None:
        async with self.gate:
            await work


async def relay_phases(phases: Phases, settings: Any) -> None:
    services = build_services(settings)
    key = (await services.accounts.create_account("Bench")).test_key
    app: App = create_app(services)
    to, idempotency = numbers(), keys()
    created: list[str] = []

    async def post(path: str, body: bytes) -> bytes:
        status, answer = await call(
            app, "POST", path, body, key, [(b"idempotency-key", next(idempotency))]
        )
        assert status == 200, answer
        return answer

    async def get(path: str) -> bytes:
        status, answer = await call(app, "GET", path, b"", key)
        assert status == 200, answer
        return answer

    async def create(i: int) -> None:
        found = ID.search(await post("/v1/verifications", json.dumps({"to": next(to)}).encode()))
        assert found is not None
        created.append(found.group(1).decode())

    def check(code: str, status: bytes) -> Callable[[int], Awaitable[None]]:
        async def work(i: int) -> None:
            body = json.dumps({"id": created[i], "code": code}).encode()
            answer = await post("/v1/verifications/check", body)
            assert b'"status":"%s"' % status in answer, answer

        return work

    async def retrieve(i: int) -> None:
        await get(f"/v1/verifications/{created[i]}")

    async def page(i: int) -> None:
        # The API's default page: the ten newest.
        shown = (await get("/v1/verifications")).count(b'"object":"verification"')
        assert shown == min(10, phases.total), shown

    async def message(i: int) -> None:
        await post("/v1/messages", json.dumps({"to": next(to), "code": "123456"}).encode())

    async with app.router.lifespan_context(app):
        # Each counted phase finds the WAL empty, as the checkpoint thread keeps it.
        writer = sqlite3.connect(settings.resolved_database_url.removeprefix("sqlite:///"))
        phases.settle = lambda: writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
        # The i-th call of every phase after the creates takes the i-th verification
        # created: each check, right or wrong, finds it pending, one wrong check counted
        # before the right one.
        for name, work in zip(
            OPERATIONS,
            (create, check(WRONG_CODE, b"pending"), check("000000", b"approved"), retrieve, page,
             message),
            strict=True,
        ):  # fmt: skip
            await phases.run(name, work)
        writer.close()


async def floor_phases(phases: Phases, data_dir: Path) -> None:
    """The reference floor (`bench/reference/app.py`, as `bench/in_process.py --floor`
    loads it): its create, then a wrong code checked on each."""
    os.environ.update({"REF_DB": "sqlite", "REF_SQLITE": str(data_dir / "floor.sqlite3")})
    spec = importlib.util.spec_from_file_location("reference_floor", REFERENCE / "app.py")
    assert spec is not None
    assert spec.loader is not None
    floor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(floor)
    app: App = floor.app
    to = numbers()
    created: list[str] = []

    async def create(i: int) -> None:
        body = json.dumps({"to": next(to)}).encode()
        status, body = await call(app, "POST", "/v1/verifications", body, "")
        assert status == 200, body
        created.append(json.loads(body)["id"])

    async def check(i: int) -> None:
        body = json.dumps({"id": created[i], "code": WRONG_CODE}).encode()
        status, answer = await call(app, "POST", "/v1/verifications/check", body, "")
        assert status == 200, answer

    async with app.router.lifespan_context(app):
        phases.settle = lambda: floor.store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
        await phases.run("floor_create", create)
        await phases.run("floor_check", check)


def quiet_background() -> None:
    """No loop on a timer in the measured process (see the docstring)."""
    Background.start = lambda self: None  # type: ignore[method-assign]
    # Set, not created: a renamed interval must fail here, not tick in the counts.
    assert hasattr(relay.db.sqlite, "CHECKPOINT_INTERVAL")
    relay.db.sqlite.CHECKPOINT_INTERVAL = 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="counted calls of each operation")
    parser.add_argument("--warmup", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--out", type=Path, help="where to build the marks (under callgrind)")
    args = parser.parse_args()
    quiet_background()
    marks = Marks.build(args.out) if args.out else None
    phases = Phases(marks, args.warmup, args.calls, args.concurrency)
    with tempfile.TemporaryDirectory(prefix="relay-budget-") as tmp:
        settings = bench_settings(argparse.Namespace(db="sqlite"), Path(tmp))
        # As `relay serve` runs the app: a log line for every request, to stderr.
        configure(settings.log_level, settings.log_format)
        upgrade(settings.resolved_database_url)
        # asyncio's own loop: `relay serve` runs granian in `asyncio.run`.
        with asyncio.Runner() as runner:
            runner.run(relay_phases(phases, settings))
            runner.run(floor_phases(phases, Path(tmp)))


if __name__ == "__main__":
    main()
