"""What every wrk-driven benchmark needs: a free port, a server that answers, the bench
account, one wrk run read into a `Result`, and the CPU a server's processes used.

bench/verify_bench.py, bench/smpp_bench.py, bench/webhook_bench.py and bench/soak.py use them.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx


@dataclass(frozen=True)
class Result:
    requests: int
    seconds: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    non_2xx: int
    socket_errors: int
    late: int
    target_rps: float | None = None
    # CPU seconds the server's processes used during the run, per request: what
    # the server spends on one request, whatever wrk and the database take.
    cpu_us: float | None = None

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class Row:
    server: str
    call: str
    result: Result
    # Creates and checks: "keyed" (an Idempotency-Key on every POST) or "bare".
    shape: str = ""


@dataclass(frozen=True)
class Load:
    seconds: int
    connections: int
    threads: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, context: ssl.SSLContext, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited early: {url}")
        try:
            if httpx.get(f"{url}/healthz", verify=context).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit(f"server not ready: {url}")


def bench_account(relay: str, env: dict[str, str]) -> dict[str, str]:
    """Migrate the database `env` names; create the bench account (`relay accounts create`)."""
    subprocess.run([relay, "migrate"], env=env, check=True, capture_output=True)
    created = subprocess.run(
        [relay, "accounts", "create", "Bench", "--json"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    account: dict[str, str] = json.loads(created.stdout)
    return account


@contextmanager
def running(command: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)


def wrk(url: str, script: str, path: Path, load: Load, *, seconds: int | None = None) -> Result:
    path.write_text(script)
    command = [
        "wrk",
        f"-t{load.threads}",
        f"-c{load.connections}",
        f"-d{seconds or load.seconds}s",
        "--timeout",
        "10s",
        "-s",
        str(path),
        url,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    line = next((s for s in done.stdout.splitlines() if s.startswith("BENCH ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"wrk failed on {url}:\n{done.stdout}\n{done.stderr}")
    stats = json.loads(line.removeprefix("BENCH "))
    if stats["requests"] == 0:
        raise SystemExit(f"wrk completed no request on {url}:\n{done.stdout}\n{done.stderr}")
    return Result(
        requests=stats["requests"],
        seconds=stats["duration_us"] / 1e6,
        p50_ms=stats["p50_us"] / 1000,
        p95_ms=stats["p95_us"] / 1000,
        p99_ms=stats["p99_us"] / 1000,
        non_2xx=stats["non_2xx"],
        socket_errors=stats["socket_errors"],
        late=stats["late"],
    )


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def server_cpu_seconds(pid: int) -> float:
    """User and system CPU of `pid` and every process below it (uvicorn's workers), Linux."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        tree.update(children)
        frontier.extend(children)
    return sum(times.get(member, 0.0) for member in tree)
