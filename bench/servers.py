"""Relay under granian (`relay serve`) and under uvicorn: the same app, TLS certificate
and database.

The HTTP-server lever of docs/decisions/0033-granian-as-the-http-server.md, measured on
the production request shape: test-key creates and checks carrying an
`Idempotency-Key` on every POST, and GET /healthz for the stack alone. Each
server runs Relay in one process on SQLite (as `make run` does); they take
turns, `--rounds` times, so that drift of a shared machine falls on both. Each
row gives requests per second at peak (64 connections, closed loop) and the
CPU the server's processes used per request (user and system time from /proc):
that figure, not the rate, decides whether a server saves the 10 % the lever
must save.

uvicorn is started with Relay's app through `bench/relay_app.py` (the app
`relay serve` builds, from the same RELAY_* settings), with httptools as its
parser and the same TLS certificate.

Usage:
  .venv/bin/python bench/servers.py [--seconds 10] [--rounds 2]
  .venv/bin/python bench/servers.py --smoke      # a few seconds, for CI
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.serving import Load, Result, free_port, running, wait_ready  # noqa: E402
from bench.verify_bench import Driver  # noqa: E402

SERVERS = ("uvicorn", "granian")
CALLS = ("healthz", "create", "check")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    args = parser.parse_args(argv)
    if args.smoke:
        args.seconds, args.rounds, args.connections = 2, 1, 8
    return args


def environment(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "RELAY_DATA_DIR": str(tmp / "data"),
        "RELAY_DATABASE_URL": f"sqlite:///{tmp / 'relay.sqlite3'}",
        # Limits that would refuse a benchmark's load, not limits under test.
        "RELAY_RATE_LIMIT": "1000000",
        "RELAY_RATE_LIMIT_BURST": "1000000",
        "RELAY_PUMPING_GUARD": "off",
        "RELAY_DAILY_SMS_CAP": "1000000000",
        "RELAY_LOG_LEVEL": "warning",
    }


def command(server: str, port: int, cert: Path, key: Path) -> list[str]:
    bin_dir = Path(sys.executable).parent
    if server == "granian":
        return [
            str(bin_dir / "relay"),
            "serve",
            "--port",
            str(port),
            "--tls-cert",
            str(cert),
            "--tls-key",
            str(key),
        ]
    return [
        str(bin_dir / "uvicorn"),
        "--factory",
        "relay_app:app",
        "--app-dir",
        str(ROOT / "bench"),
        "--port",
        str(port),
        "--http",
        "httptools",
        "--log-level",
        "warning",
        "--no-access-log",
        "--ssl-certfile",
        str(cert),
        "--ssl-keyfile",
        str(key),
    ]


def measure(server: str, tmp: Path, key: str, load: Load) -> dict[str, Result]:
    from relay.tls import ensure_self_signed

    cert = ensure_self_signed(tmp / "tls")
    context = ssl.create_default_context(cafile=str(cert.cert))
    port = free_port()
    url = f"https://localhost:{port}"
    with running(command(server, port, cert.cert, cert.key), environment(tmp)) as process:
        wait_ready(url, context, process)
        driver = Driver(server, url, key, tmp, load, process.pid)
        driver.create(seconds=max(1, load.seconds // 2))  # warm-up, and ids for the checks
        return {"healthz": driver.healthz(), "create": driver.create(), "check": driver.check()}


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    load = Load(args.seconds, args.connections, 2)
    results: dict[tuple[str, str], list[Result]] = {}
    with tempfile.TemporaryDirectory(prefix="relay-servers-") as name:
        tmp = Path(name)
        env = environment(tmp)
        relay = str(Path(sys.executable).parent / "relay")
        subprocess.run([relay, "migrate"], env=env, check=True, capture_output=True)
        made = subprocess.run(
            [relay, "accounts", "create", "Bench", "--json"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        key = json.loads(made.stdout)["test_key"]
        for _ in range(args.rounds):
            for server in SERVERS:
                for call, result in measure(server, tmp, key, load).items():
                    results.setdefault((server, call), []).append(result)
    print(report(results))


def report(results: dict[tuple[str, str], list[Result]]) -> str:
    lines = [
        "| call | server | req/s (median) | CPU µs per request (median) | p99 ms | runs |",
        "|---|---|---|---|---|---|",
    ]
    for call in CALLS:
        for server in SERVERS:
            runs = results[(server, call)]
            rate = statistics.median(r.rps for r in runs)
            cpu = statistics.median(r.cpu_us or 0.0 for r in runs)
            p99 = statistics.median(r.p99_ms for r in runs)
            cells = f"{rate:,.0f} | {cpu:,.0f} | {p99:.1f} | {len(runs)}"
            lines.append(f"| {call} | {server} | {cells} |")
        uvicorn_cpu = statistics.median(r.cpu_us or 0.0 for r in results[("uvicorn", call)])
        granian_cpu = statistics.median(r.cpu_us or 0.0 for r in results[("granian", call)])
        if uvicorn_cpu:
            saving = 1 - granian_cpu / uvicorn_cpu
            lines.append(f"| {call} | granian saves | | {saving:+.1%} of uvicorn's CPU | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
