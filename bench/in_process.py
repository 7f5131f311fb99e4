"""Create, check and retrieve through the ASGI app in this process: no TLS, no socket, no wrk.

What one request costs inside Relay, with the HTTP server and the load
generator taken out: the figures wrk cannot separate from the machine's noise.
Builds the real app (every middleware, the Starlette router, the services, the sandbox
carriers) over a fresh SQLite database, or PostgreSQL with `--db pg`, and calls
it with `--concurrency` requests in flight. Reports, per call: wall time, CPU
time of this process, and SQL statements sent (counted at the driver).

With `--floor` (SQLite), the reference floor (`bench/reference/app.py`)
is called in-process the same way as Relay, and its SQL is timed alone too.
(What Relay's own data layer costs alone: `bench/group_commit.py`.)

Usage:
  .venv/bin/python bench/in_process.py [--calls 400] [--concurrency 1] [--db sqlite|pg] [--floor]
  .venv/bin/python bench/in_process.py --smoke     # 40 calls, for CI
  .venv/bin/python bench/in_process.py --no-metrics   # the cost of metrics, by difference
  PROMETHEUS_MULTIPROC_DIR=$(mktemp -d) .venv/bin/python bench/in_process.py
      # metrics as `relay serve --workers N` keeps them (files shared between processes)
PostgreSQL: RELAY_BENCH_INPROCESS_PG, default postgresql://127.0.0.1:5432/relay_bench_inprocess;
create it once: psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE relay_bench_inprocess'
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from relay.config import Settings  # noqa: E402
from relay.db.migrate import upgrade  # noqa: E402
from relay.services import build_services  # noqa: E402
from relay.web.app import create_app  # noqa: E402

PG_URL = os.environ.get(
    "RELAY_BENCH_INPROCESS_PG", "postgresql://127.0.0.1:5432/relay_bench_inprocess"
)
CODE_KEY = "bench-code-key-0123456789-0123456789-abcdef"
REFERENCE = ROOT / "bench" / "reference"

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


async def call(
    app: App,
    method: str,
    path: str,
    body: bytes,
    key: str,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> tuple[int, bytes]:
    """One request through the ASGI app, as uvicorn would pass it; `extra` headers last."""
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [
            (b"host", b"localhost"),
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {key}".encode()),
            (b"content-length", str(len(body)).encode()),
            *(extra or []),
        ],
        "scheme": "https",
        "client": ("127.0.0.1", 50000),
        "server": ("localhost", 443),
        "http_version": "1.1",
        "root_path": "",
        "asgi": {"version": "3.0"},
        "state": {},
    }
    delivered = False
    answer: dict[str, Any] = {"status": 0, "body": b""}

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    await app(scope, receive, send)
    return answer["status"], answer["body"]


# Distinct numbers: a repeat within 30 s would be refused as a resend too soon.
_numbers = itertools.count(random.randint(2_000_000, 5_000_000))


def number() -> bytes:
    return json.dumps({"to": f"+1415{next(_numbers)}"}).encode()


def bench_settings(args: argparse.Namespace, data_dir: Path) -> Settings:
    url = PG_URL if args.db == "pg" else f"sqlite:///{data_dir / 'relay.sqlite3'}"
    return Settings(
        data_dir=data_dir,
        database_url=url,
        code_key=CODE_KEY,
        # Limits that would refuse a benchmark's load, not limits under test.
        rate_limit=1_000_000,
        rate_limit_burst=1_000_000,
        pumping_guard="off",
        daily_sms_cap=1_000_000_000,
        number_verifications_per_hour=1_000_000,
    )


async def measure(args: argparse.Namespace, settings: Settings) -> dict[str, float]:
    """Relay's calls; returns µs of CPU per call by name, for the --sql tables."""
    services = build_services(settings)
    key = (await services.accounts.create_account("Bench")).test_key
    app = create_app(services)
    statements = 0

    def count(_: object, __: object) -> None:
        nonlocal statements
        statements += 1

    services.db.trace(count)
    ids: list[str] = []
    gate = asyncio.Semaphore(args.concurrency)

    async def create() -> None:
        status, body = await call(app, "POST", "/v1/verifications", number(), key)
        assert status == 200, body
        ids.append(json.loads(body)["id"])

    async def check(i: int) -> None:
        body = json.dumps({"id": ids[i], "code": "123456"}).encode()
        status, answer = await call(app, "POST", "/v1/verifications/check", body, key)
        assert status == 200, answer

    async def retrieve(i: int) -> None:
        status, answer = await call(app, "GET", f"/v1/verifications/{ids[i]}", b"", key)
        assert status == 200, answer

    async def gated(work: Awaitable[None]) -> None:
        async with gate:
            await work

    cpu_per_call: dict[str, float] = {}
    async with app.router.lifespan_context(app):
        for _ in range(args.warmup):
            await create()
        ids.clear()
        print(
            f"db={args.db} calls={args.calls} concurrency={args.concurrency} "
            "(ASGI app called in-process: no TLS, no socket)"
        )
        print(f"{'call':9} {'per s':>8} {'µs wall':>9} {'µs CPU':>8} {'statements':>11}")
        runs: list[tuple[str, Callable[[int], Awaitable[None]]]] = [
            ("create", lambda _: create()),
            ("check", check),
            ("retrieve", retrieve),
        ]
        for name, work in runs:
            statements = 0
            started, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(gated(work(i)) for i in range(args.calls)))
            wall = time.perf_counter() - started
            used = time.process_time() - cpu
            cpu_per_call[name] = used / args.calls * 1e6
            print(
                f"{name:9} {args.calls / wall:8,.0f} {wall / args.calls * 1e6:9,.0f} "
                f"{cpu_per_call[name]:8,.0f} {statements / args.calls:11.1f}"
            )
    return cpu_per_call


async def measure_floor(args: argparse.Namespace, tmp: Path, relay_cpu: dict[str, float]) -> None:
    """The reference floor's create and check, called in-process like Relay's."""
    import importlib.util

    os.environ.update({"REF_DB": "sqlite", "REF_SQLITE": str(tmp / "floor.sqlite3")})
    spec = importlib.util.spec_from_file_location("reference_floor", REFERENCE / "app.py")
    assert spec is not None
    assert spec.loader is not None
    floor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(floor)
    app = floor.app
    ids: list[str] = []
    cpu: dict[str, float] = {}

    async def create(_: int) -> None:
        status, body = await call(app, "POST", "/v1/verifications", number(), "")
        assert status == 200, body
        ids.append(json.loads(body)["id"])

    async def check(i: int) -> None:
        body = json.dumps({"id": ids[i], "code": "123456"}).encode()
        status, answer = await call(app, "POST", "/v1/verifications/check", body, "")
        assert status == 200, answer

    print()
    print("Floor: the reference floor's app, called the same way")
    print(f"{'call':9} {'µs wall':>9} {'µs CPU':>8} {'µs SQL':>7} {'Relay CPU':>10}")
    async with app.router.lifespan_context(app):
        for _ in range(args.warmup):
            await create(0)
        ids.clear()
        for name, work in (("create", create), ("check", check)):
            started, used = time.perf_counter(), time.process_time()
            for i in range(args.calls):
                await work(i)
            wall = time.perf_counter() - started
            cpu[name] = (time.process_time() - used) / args.calls * 1e6
            sql = await floor_sql(floor, name, args.calls)
            print(
                f"{name:9} {wall / args.calls * 1e6:9,.0f} {cpu[name]:8,.0f} {sql:7,.0f}"
                f" {relay_cpu[name] / cpu[name]:9.1f}x"
            )


async def floor_sql(floor: Any, name: str, calls: int) -> float:
    """µs per call in the floor's store alone (its SQL, plus the check's one HMAC)."""
    store = floor.store
    if name == "create":
        rows = [floor.new_row(f"+1415{next(_numbers)}") for _ in range(calls)]
        started = time.perf_counter()
        for row in rows:
            await store.create(*row)
    else:
        found = store.db.execute(
            "SELECT id FROM ref_verifications WHERE status = 'pending' AND checks < 4 LIMIT ?",
            (calls,),
        ).fetchall()
        started = time.perf_counter()
        for (vid,) in found:
            await store.check(vid, "123456")
        calls = len(found)
    return (time.perf_counter() - started) / calls * 1e6


def switch_metrics_off() -> None:
    from relay.metrics import observe

    def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    for name in (
        "verification_created",
        "verification_approved",
        "sms_attempt",
        "sms_receipt",
        "webhook_attempt",
        "http_request",
    ):
        setattr(observe, name, nothing)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="40 calls, for CI")
    parser.add_argument(
        "--floor", action="store_true", help="SQLite: also the reference floor, in-process"
    )
    parser.add_argument(
        "--no-metrics", action="store_true", help="count nothing: every metrics call a no-op"
    )
    args = parser.parse_args()
    if args.no_metrics:
        switch_metrics_off()
    if args.floor and args.db != "sqlite":
        raise SystemExit("--floor runs the floor on SQLite: use it with --db sqlite")
    if args.smoke:
        args.calls, args.warmup = 40, 5
    if args.db == "pg":
        from bench.verify_bench import _require_database, reset_schema

        asyncio.run(_require_database(PG_URL))
        asyncio.run(reset_schema(PG_URL))
    with tempfile.TemporaryDirectory() as tmp:
        settings = bench_settings(args, Path(tmp))
        upgrade(settings.resolved_database_url)  # runs its own event loop on PostgreSQL
        relay_cpu = asyncio.run(measure(args, settings))
        if args.floor:
            shutil.rmtree(Path(tmp) / "floor", ignore_errors=True)
            asyncio.run(measure_floor(args, Path(tmp), relay_cpu))


if __name__ == "__main__":
    main()
