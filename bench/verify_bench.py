"""Throughput and latency over HTTPS: Relay beside the reference floor, in the same run.

Starts `bench/reference/app.py`, then `relay serve`, one after the
other, with the same server (uvicorn), the same TLS certificate, the same
database kind and the same number of processes (SQLite: 1; PostgreSQL: 2, with
`relay serve --workers 2` and `uvicorn --workers 2`). wrk (Debian package `wrk`)
drives them from this machine.

Each server is first measured at its peak, closed-loop (every connection sends
its next request as soon as the previous answer arrives): GET /healthz (the
stack's ceiling), create and check, and for Relay also retrieve and list. The
reference floor has no retrieve or list. Then Relay's create and check run
again at half the peak rate just measured, where the p99 target applies.

Creates and checks are measured in two request shapes (bench/wrk_scripts.py),
each server given the same requests: `keyed`, an `Idempotency-Key` of its own
on every POST as relay-client sends (the headline figures), and `bare`, without
the header. The floor ignores the header; Relay looks the key up and keeps the
answer under it.

Half-peak pacing is done inside wrk, by the Lua `delay()` hook: every free
connection claims the next slot of one fixed schedule (LuaJIT's ffi reads
CLOCK_MONOTONIC) and waits for it. Latency counts from the moment a request is
written. A connection that finds its slot already past (all connections were
busy) is counted as late; the report shows the achieved rate and these slips,
so a run that fell behind its schedule is visible rather than hidden. The
schedule starts PACING_START_S after wrk starts. Without that pause the first
requests queued behind work that is not theirs: the previous closed-loop run's
in-flight requests, which the server still finishes after wrk has left (64
creates: about half a second here), and 64 new TLS handshakes. The server's log
showed it: every slow request of a paced run was in its first 0.6 s, finishing
8 ms after the one before. That second is left out of the achieved rate.

Each row also shows the CPU the server's processes used per request during
the run (user and system time from /proc, so Linux only): what one request
costs the server, apart from wrk and, on PostgreSQL, the database server.

Checks send a wrong code to verifications made by the create runs, each at most
four times, so every measured check finds its verification pending on both
servers; a verification's checks come 256 requests apart, never two at once,
as a person's second try follows the first.

Usage:
  .venv/bin/python bench/verify_bench.py [--db sqlite|pg] [--seconds 10] [--connections 64]
  .venv/bin/python bench/verify_bench.py --smoke      # a few seconds, for CI
bench/run_all.py calls `run(parse([...]))`, and bench/verify_report.py's `figures(rows, db)`
for the figures as data.
PostgreSQL: RELAY_BENCH_PG, default postgresql://127.0.0.1:5432/relay_bench_http;
create it once: psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE relay_bench_http'
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import dataclasses
import json
import math
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.serving import (  # noqa: E402
    Load,
    Result,
    Row,
    free_port,
    running,
    server_cpu_seconds,
    wait_ready,
    wrk,
)
from bench.verify_report import report  # noqa: E402
from bench.wrk_scripts import (  # noqa: E402
    LUA_CHECK,
    LUA_CREATE,
    LUA_RETRIEVE,
    SHAPES,
    pacing_lua,
    script,
)

REFERENCE = ROOT / "bench" / "reference"
PG_URL = os.environ.get("RELAY_BENCH_PG", "postgresql://127.0.0.1:5432/relay_bench_http")
# A wrong code leaves a verification pending for four checks; the fifth closes it.
CHECKS_PER_ID = 4
# How many verifications a check run takes turns over (wrk_scripts.LUA_CHECK): far more
# than the requests in flight, so that no two checks of one verification run at once.
CHECK_SPREAD = 256
PACING_START_S = 1


class Driver:
    """The wrk runs against one server; creates feed the ids that later runs use."""

    def __init__(
        self, name: str, url: str, key: str, tmp: Path, load: Load, server_pid: int
    ) -> None:
        self.name, self.url, self.key, self.tmp, self.load = name, url, key, tmp, load
        self.server_pid = server_pid
        self.ids = tmp / f"{name}-ids.txt"
        self.ids.touch()
        self.next_id = 0
        self.create_rps = 0.0
        self.runs = 0
        # The request shape of the creates and checks that follow (wrk_scripts.SHAPES).
        self.shape = "keyed"

    def _script(self, body: str, rate: float | None) -> str:
        pacing = ""
        if rate is not None:
            pacing = pacing_lua(1000 * self.load.threads / rate, 1000 * PACING_START_S)
        return script(self.key, body, shape=self.shape, pacing=pacing)

    def _run(
        self, path: str, body: str, *, rate: float | None = None, seconds: int | None = None
    ) -> Result:
        self.runs += 1
        script = self._script(body, rate)
        lua = self.tmp / f"{self.name}-{self.runs}.lua"
        if rate is not None:
            seconds = (seconds or self.load.seconds) + PACING_START_S
        used = server_cpu_seconds(self.server_pid)
        result = wrk(f"{self.url}{path}", script, lua, self.load, seconds=seconds)
        used = server_cpu_seconds(self.server_pid) - used
        result = dataclasses.replace(result, cpu_us=used / result.requests * 1e6)
        if rate is not None:
            paced = result.seconds - PACING_START_S
            result = dataclasses.replace(result, target_rps=rate, seconds=paced)
        return result

    def healthz(self) -> Result:
        return self._run("/healthz", 'wrk.headers["Authorization"] = nil\n')

    def create(self, rate: float | None = None, seconds: int | None = None) -> Result:
        body = LUA_CREATE.format(ids=self.ids, seed=self.runs * 7919)
        result = self._run("/v1/verifications", body, rate=rate, seconds=seconds)
        if rate is None and seconds is None:
            self.create_rps = result.rps
        return result

    def check(self, rate: float | None = None) -> Result:
        if rate is not None:
            self._top_up(rate * self.load.seconds)
        result = self._check(rate)
        if rate is None and self.next_id > self.ids_kept():
            # Checks ran out of pending verifications and met closed ones: make
            # enough for a run like this one, and measure again.
            self._top_up(result.requests)
            result = self._check(rate)
        return result

    def _check(self, rate: float | None) -> Result:
        body = LUA_CHECK.format(
            ids=self.ids,
            threads=self.load.threads,
            start=self.next_id,
            uses=CHECKS_PER_ID,
            spread=CHECK_SPREAD,
        )
        result = self._run("/v1/verifications/check", body, rate=rate)
        # wrk does not count the requests still in flight when it stops, but the
        # server answers them: the block they fall in is used up too, so that no
        # verification gets a fifth check.
        per_block = CHECK_SPREAD * CHECKS_PER_ID
        used = CHECK_SPREAD * math.ceil((result.requests + self.load.connections) / per_block)
        self.next_id += used
        return result

    def _top_up(self, checks: float) -> None:
        """Unmeasured creates, until `checks` more checks find pending verifications."""
        needed = math.ceil(1.2 * checks / CHECKS_PER_ID) + self.load.connections + CHECK_SPREAD
        missing = self.next_id + needed - self.ids_kept()
        if missing > 0:
            self.create(seconds=math.ceil(missing / self.create_rps) + 1)

    def retrieve(self) -> Result:
        return self._run("/v1/verifications", LUA_RETRIEVE.format(ids=self.ids, seed=self.runs))

    def list(self) -> Result:
        return self._run("/v1/verifications?limit=10", 'wrk.method = "GET"\n')

    def ids_kept(self) -> int:
        return len(set(self.ids.read_text().split()))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--seconds", type=int, default=10, help="per measured run")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument(
        "--processes", type=int, help="server processes each (default: sqlite 1, pg 2)"
    )
    parser.add_argument("--warmup", type=int, default=2, help="seconds of creates before measuring")
    parser.add_argument("--smoke", action="store_true", help="1-second runs, for CI")
    args = parser.parse_args(argv)
    if args.smoke:
        args.seconds, args.connections, args.warmup = 1, 8, 0
    if args.processes is None:
        args.processes = 2 if args.db == "pg" else 1
    if args.db == "sqlite" and args.processes != 1:
        raise SystemExit("SQLite is served by one process; use --db pg for --processes > 1")
    return args


def main() -> None:
    args = parse()
    report(run(args), args)


def run(args: argparse.Namespace) -> list[Row]:
    """Every measured row of one run, the floor's first (bench/run_all.py calls this)."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk); nothing was run")
    if args.db == "pg":
        asyncio.run(_require_database(PG_URL))
        asyncio.run(reset_schema(PG_URL))
    with tempfile.TemporaryDirectory() as tmp:
        return run_all(Path(tmp), args)


async def _require_database(url: str) -> None:
    import asyncpg

    try:
        connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    except asyncpg.InvalidCatalogNameError:
        name = url.rsplit("/", 1)[-1]
        raise SystemExit(
            f"database {name} does not exist; create it once with: "
            f"psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE {name}'"
        ) from None
    except OSError as error:
        raise SystemExit(f"PostgreSQL at {url} is not reachable: {error}") from None
    await connection.close()


async def reset_schema(url: str) -> None:
    """Every run starts from an empty database: rows left by earlier runs (the
    floor's and Relay's) would make runs differ by how many came before."""
    import asyncpg

    connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await connection.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        # The floor's processes each create its tables when they start; two of
        # them doing it at once on an empty schema can collide in PostgreSQL's
        # catalog (duplicate key on pg_type). Created here first, theirs is a no-op.
        for statement in floor_schema():
            await connection.execute(statement.replace("BLOB", "BYTEA"))
    finally:
        await connection.close()


def floor_schema() -> list[str]:
    """The floor's CREATE TABLE statements, read from its source without running it."""
    tree = ast.parse((REFERENCE / "app.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SCHEMA":
            found: list[str] = ast.literal_eval(node.value)
            return found
    raise SystemExit("the reference floor's app.py has no SCHEMA list")


def run_all(tmp: Path, args: argparse.Namespace) -> list[Row]:
    from relay.tls import ensure_self_signed

    cert = ensure_self_signed(tmp / "tls")
    context = ssl.create_default_context(cafile=str(cert.cert))
    relay_db = PG_URL if args.db == "pg" else f"sqlite:///{tmp / 'relay.sqlite3'}"
    env = {
        **os.environ,
        "RELAY_DATA_DIR": str(tmp / "data"),
        "RELAY_DATABASE_URL": relay_db,
        # Limits that would refuse a benchmark's load, not limits under test.
        "RELAY_RATE_LIMIT": "1000000",
        "RELAY_RATE_LIMIT_BURST": "1000000",
        "RELAY_PUMPING_GUARD": "off",
        "RELAY_DAILY_SMS_CAP": "1000000000",
        "RELAY_LOG_LEVEL": "warning",
    }
    bin_dir = Path(sys.executable).parent
    account = json.loads(
        subprocess.run(
            [str(bin_dir / "relay"), "accounts", "create", "Bench", "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    key = account["test_key"]
    ref_port, relay_port = free_port(), free_port()
    tls = ["--ssl-certfile", str(cert.cert), "--ssl-keyfile", str(cert.key)]
    ref_env = {
        **os.environ,
        "REF_DB": args.db,
        "REF_SQLITE": str(tmp / "ref.sqlite3"),
        "REF_PG_DSN": PG_URL,
    }
    ref_cmd = [
        str(bin_dir / "uvicorn"),
        "app:app",
        "--app-dir",
        str(REFERENCE),
        "--port",
        str(ref_port),
        "--workers",
        str(args.processes),
        "--log-level",
        "warning",
        *tls,
    ]
    relay_cmd = [
        str(bin_dir / "relay"),
        "serve",
        "--port",
        str(relay_port),
        "--workers",
        str(args.processes),
        "--tls-cert",
        str(cert.cert),
        "--tls-key",
        str(cert.key),
    ]
    load = Load(args.seconds, args.connections, args.threads)
    rows: list[Row] = []
    for name, command, command_env, port in (
        ("reference", ref_cmd, ref_env, ref_port),
        ("relay", relay_cmd, env, relay_port),
    ):
        url = f"https://localhost:{port}"
        with running(command, command_env) as process:
            wait_ready(url, context, process)
            driver = Driver(name, url, key, tmp, load, process.pid)
            rows += measure(driver, args)
    return rows


def measure(driver: Driver, args: argparse.Namespace) -> list[Row]:
    """Both request shapes of create and check on one server, each at peak, and
    for Relay each again at half its own peak in that shape."""
    if args.warmup:
        driver.create(seconds=args.warmup)
    name = driver.name
    rows = [Row(name, "healthz", driver.healthz())]
    peaks: dict[str, tuple[Result, Result]] = {}
    for shape in SHAPES:
        driver.shape = shape
        create, check = driver.create(), driver.check()
        rows += [Row(name, "create", create, shape), Row(name, "check", check, shape)]
        peaks[shape] = (create, check)
    if name != "relay":
        return rows
    rows += [Row(name, "retrieve", driver.retrieve()), Row(name, "list", driver.list())]
    for shape in SHAPES:
        driver.shape = shape
        create, check = peaks[shape]
        rows += [
            Row(name, "create", driver.create(rate=create.rps / 2), shape),
            Row(name, "check", driver.check(rate=check.rps / 2), shape),
        ]
    return rows


if __name__ == "__main__":
    main()
