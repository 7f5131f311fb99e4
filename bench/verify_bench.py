"""Create and check throughput over HTTPS: Relay beside the reference floor, same run.

Starts `../shared/bench/reference/app.py` and `relay serve` with the same server
(uvicorn, one process), the same TLS certificate, the same database kind, then
drives both with wrk (Debian package `wrk`) and prints req/s, p50/p99 and
Relay's fraction of the floor.

Usage:
  .venv/bin/python bench/verify_bench.py [--db sqlite|pg] [--seconds 10] [--connections 64]
  .venv/bin/python bench/verify_bench.py --smoke      # a few seconds, for CI
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "bench" / "reference"
PG_URL = os.environ.get("RELAY_BENCH_PG", "postgresql://127.0.0.1:5432/test")

CREATE_LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {key}"
math.randomseed(os.time() + {seed})
request = function()
  return wrk.format(nil, nil, nil, '{{"to": "+1415' .. math.random(2000000, 9999999) .. '"}}')
end
"""

CHECK_LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {key}"
ids = {{}}
for line in io.lines("{ids}") do ids[#ids + 1] = line end
request = function()
  local id = ids[math.random(#ids)]
  return wrk.format(nil, nil, nil, '{{"id": "' .. id .. '", "code": "123456"}}')
end
"""


@dataclass(frozen=True)
class Result:
    rps: float
    p50_ms: float
    p99_ms: float
    non_2xx: int


def free_port() -> int:
    import socket

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


@contextmanager
def running(command: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=20)


def wrk(url: str, script: Path, *, seconds: int, connections: int) -> Result:
    output = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    return Result(
        rps,
        _percentile(output, "50%"),
        _percentile(output, "99%"),
        int(non_2xx.group(1)) if non_2xx else 0,
    )


def _percentile(output: str, label: str) -> float:
    match = re.search(rf"{re.escape(label)}\s+([\d.]+)(us|ms|s)", output)
    if match is None:
        return float("nan")
    value, unit = float(match.group(1)), match.group(2)
    return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value


def seed_ids(url: str, key: str, context: ssl.SSLContext, count: int, path: Path) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    ids = []
    with httpx.Client(base_url=url, verify=context, headers=headers) as client:
        for index in range(count):
            body = client.post("/v1/verifications", json={"to": f"+1415{2000000 + index}"}).json()
            ids.append(body["id"])
    path.write_text("\n".join(ids) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--smoke", action="store_true", help="2-second runs, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.connections = 2, 8
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk")
    with tempfile.TemporaryDirectory() as tmp:
        run_all(Path(tmp), args)


def run_all(tmp: Path, args: argparse.Namespace) -> None:
    from relay.tls import ensure_self_signed

    cert = ensure_self_signed(tmp / "tls")
    context = ssl.create_default_context(cafile=str(cert.cert))
    relay_url_db = PG_URL if args.db == "pg" else f"sqlite:///{tmp / 'relay.sqlite3'}"
    env = {
        **os.environ,
        "RELAY_DATA_DIR": str(tmp / "data"),
        "RELAY_DATABASE_URL": relay_url_db,
        "RELAY_RATE_LIMIT": "1000000",
        "RELAY_RATE_LIMIT_BURST": "1000000",
        "RELAY_PUMPING_GUARD": "off",
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
    tls = [
        "--ssl-certfile",
        str(cert.cert),
        "--ssl-keyfile",
        str(cert.key),
        "--log-level",
        "warning",
    ]
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
        *tls,
    ]
    relay_cmd = [
        str(bin_dir / "relay"),
        "serve",
        "--port",
        str(relay_port),
        "--tls-cert",
        str(cert.cert),
        "--tls-key",
        str(cert.key),
    ]
    rows: list[tuple[str, str, Result]] = []
    for name, command, command_env, port in (
        ("reference", ref_cmd, ref_env, ref_port),
        ("relay", relay_cmd, env, relay_port),
    ):
        url = f"https://localhost:{port}"
        with running(command, command_env) as process:
            wait_ready(url, context, process)
            rows += measure(name, url, key, context, tmp, args)
    report(rows, args)


def measure(
    name: str, url: str, key: str, context: ssl.SSLContext, tmp: Path, args: argparse.Namespace
) -> list[tuple[str, str, Result]]:
    create_script = tmp / f"{name}-create.lua"
    create_script.write_text(CREATE_LUA.format(key=key, seed=len(name)))
    ids = tmp / f"{name}-ids.txt"
    seed_ids(url, key, context, 50 if args.smoke else 500, ids)
    check_script = tmp / f"{name}-check.lua"
    check_script.write_text(CHECK_LUA.format(key=key, ids=ids))
    return [
        (
            name,
            "create",
            wrk(
                f"{url}/v1/verifications",
                create_script,
                seconds=args.seconds,
                connections=args.connections,
            ),
        ),
        (
            name,
            "check",
            wrk(
                f"{url}/v1/verifications/check",
                check_script,
                seconds=args.seconds,
                connections=args.connections,
            ),
        ),
    ]


def report(rows: list[tuple[str, str, Result]], args: argparse.Namespace) -> None:
    print(f"db={args.db} seconds={args.seconds} connections={args.connections}", end=" ")
    print("(wrk, HTTPS, 1 server process each)")
    print(f"{'server':10} {'call':7} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8}")
    results = {(server, call): result for server, call, result in rows}
    for (server, call), result in results.items():
        latency = f"{result.p50_ms:8.2f} {result.p99_ms:8.2f}"
        print(f"{server:10} {call:7} {result.rps:9.0f} {latency} {result.non_2xx:8}")
    for call in ("create", "check"):
        ratio = results[("relay", call)].rps / results[("reference", call)].rps
        print(f"relay/{call} = {ratio:.0%} of the reference floor")


if __name__ == "__main__":
    main()
