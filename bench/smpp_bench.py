"""Send API or verifications end to end over SMPP: HTTPS request → submit_sm → receipt → webhook.

Starts a real SMSC (node-smpp, the peer of the test suite; needs Node.js and
npm), `relay serve` with one SMPP carrier bound to it, and a webhook receiver
in a process of its own (bench/webhook_sink.py). wrk (Debian package `wrk`)
sends, with the account's live key, `POST /v1/messages` (`--api messages`) or
`POST /v1/verifications` (`--api verifications`: each with an
`Idempotency-Key` of its own, as relay-client sends, and a number of its own,
so no resend interval or per-number cap applies) for `--seconds`, each with a
`webhook_url`; then the bench waits for every `message.delivered` (or
`verification.delivered`) webhook and reports:

* request rate and p50/p99 latency of the POST (wrk's figures);
* the end-to-end rate: messages delivered divided by the time from the first
  request to the last delivered webhook received.

With `--kannel`, Kannel (Debian package `kannel`, see bench/kannel_reference.py)
drives the same SMSC in the same run, and the ratio is printed.

Usage:
  .venv/bin/python bench/smpp_bench.py [--seconds 10] [--connections 64] [--db sqlite|pg]
                                       [--api messages|verifications]
                                       [--kannel [--kannel-messages 20000]]
  .venv/bin/python bench/smpp_bench.py --smoke     # a few seconds, for CI
bench/run_all.py calls `run(parse([...]))` for the figures as data.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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
sys.path.insert(0, str(ROOT))

from bench.serving import bench_account, free_port, wait_ready  # noqa: E402
from bench.wrk_scripts import shape_lua  # noqa: E402
from tests.carriers.smpp_peer import SmppPeer, install_peer  # noqa: E402

from relay.tls import CertificatePaths, ensure_self_signed  # noqa: E402

RELAY = str(ROOT / ".venv" / "bin" / "relay")
PYTHON = str(ROOT / ".venv" / "bin" / "python")
PG_URL = os.environ.get("RELAY_BENCH_PG", "postgresql://127.0.0.1:5432/relay_bench_smpp")

SEND_LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {key}"
local counter = 0
request = function()
  counter = counter + 1
  local to = string.format("+1415%07d", 2000000 + (counter * 7919 + math.random(0, 7918)) % 7999999)
  local code = math.random(100000, 999999)
  return wrk.format(nil, nil, nil,
    '{{"to": "' .. to .. '", "code": "' .. code .. '", "webhook_url": "{hook}"}}')
end
"""

# Every number once in a run (7919 is prime to 7,999,999, so `counter * 7919`
# walks all of them before one comes back), from a random start: a second
# verification to a number would be a resend, refused within the interval.
VERIFY_LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {key}"
{keyed}
local counter = 0
local start = nil
request = function()
  start = start or math.random(0, 7999998)
  counter = counter + 1
  local to = string.format("+1415%07d", 2000000 + (start + counter * 7919) % 7999999)
  return wrk.format(nil, nil, request_headers(),
    '{{"to": "' .. to .. '", "webhook_url": "{hook}"}}')
end
"""
# What each --api posts and the webhook that says it reached the handset.
APIS = {
    "messages": ("/v1/messages", "message.delivered"),
    "verifications": ("/v1/verifications", "verification.delivered"),
}


@dataclass
class Outcome:
    requests: int
    request_rps: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    delivered: int
    end_to_end_rps: float


@contextmanager
def sink(cert: CertificatePaths) -> Iterator[str]:
    port = free_port()
    command = [
        PYTHON,
        str(ROOT / "bench" / "webhook_sink.py"),
        "--port",
        str(port),
        "--cert",
        str(cert.cert),
        "--key",
        str(cert.key),
    ]
    process = subprocess.Popen(command)
    url = f"https://127.0.0.1:{port}"
    try:
        wait_ready_stats(url, cert, process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


def wait_ready_stats(url: str, cert: CertificatePaths, process: subprocess.Popen[bytes]) -> None:
    context = ssl.create_default_context(cafile=str(cert.cert))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("the webhook sink exited")
        try:
            if httpx.get(f"{url}/stats", verify=context).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("the webhook sink did not start")


def stats(url: str, cert: CertificatePaths, kind: str = "message.delivered") -> tuple[int, float]:
    context = ssl.create_default_context(cafile=str(cert.cert))
    body = httpx.get(f"{url}/stats", verify=context).json()
    return int(body["counts"].get(kind, 0)), float(body["last"])


def recreate_pg(url: str) -> None:
    from urllib.parse import urlsplit

    database = urlsplit(url).path.lstrip("/")
    drop = f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'
    for sql in (drop, f'CREATE DATABASE "{database}"'):
        subprocess.run(
            ["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", sql], check=True, timeout=60
        )


def prepare(env: dict[str, str]) -> str:
    """Migrate, create the bench account, return its live key."""
    return bench_account(RELAY, env)["live_key"]


def write_config(work: Path, peer_port: int, *, binds: int, window: int) -> Path:
    """One SMPP carrier bound to the SMSC at `peer_port`, the only route."""
    config = work / "relay.toml"
    config.write_text(
        "[carriers.smsc]\n"
        'kind = "smpp"\nhost = "127.0.0.1"\n'
        f"port = {peer_port}\n"
        'system_id = "relay"\npassword = "secret"\n'
        f"binds = {binds}\nwindow = {window}\n"
        '[routes]\ndefault = ["smsc"]\n'
    )
    return config


def relay_env(config: Path, data: Path, database_url: str, hook_ca: Path) -> dict[str, str]:
    """Relay's settings for the bench: webhooks to a loopback sink, no limit in the way."""
    return {
        "RELAY_CONFIG": str(config),
        "RELAY_DATA_DIR": str(data),
        "RELAY_DATABASE_URL": database_url,
        "RELAY_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
        "RELAY_WEBHOOK_CA_BUNDLE": str(hook_ca),
        "RELAY_PUMPING_GUARD": "off",
        "RELAY_DAILY_SMS_CAP": "100000000",
        "RELAY_NUMBER_VERIFICATIONS_PER_HOUR": "100000",
        "RELAY_RATE_LIMIT": "100000",
        "RELAY_RATE_LIMIT_BURST": "100000",
        "RELAY_LOG_LEVEL": "warning",
    }


def relay_side(args: argparse.Namespace, work: Path, peer_port: int) -> Outcome:
    data = work / "relay"
    data.mkdir(parents=True, exist_ok=True)
    database_url = PG_URL if args.db == "pg" else f"sqlite:///{data / 'relay.sqlite3'}"
    if args.db == "pg":
        recreate_pg(database_url)
    hook_cert = ensure_self_signed(work / "sink-tls")
    config = write_config(work, peer_port, binds=args.binds, window=args.window)
    env = {
        **os.environ,
        **relay_env(config, data, database_url, hook_cert.cert),
    }
    key = prepare(env)
    with sink(hook_cert) as hook_url, relay_serving(env, data, args.workers) as url:
        return drive(args, url, key, f"{hook_url}/hook", hook_url, hook_cert, work)


@contextmanager
def relay_serving(env: dict[str, str], data: Path, workers: int) -> Iterator[str]:
    """`relay serve --workers N` on a free port, answering: yields its URL."""
    with relay_process(env, data, workers) as (url, _pid):
        yield url


@contextmanager
def relay_process(env: dict[str, str], data: Path, workers: int) -> Iterator[tuple[str, int]]:
    """`relay serve --workers N` on a free port, answering: yields its URL and process id."""
    relay_cert = ensure_self_signed(data / "tls")  # serve uses it rather than make one
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    command = [RELAY, "serve", "--port", str(port)]
    if workers > 1:
        command += ["--workers", str(workers)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    try:
        wait_ready(url, ssl.create_default_context(cafile=str(relay_cert.cert)), process)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def drive(
    args: argparse.Namespace,
    url: str,
    key: str,
    hook: str,
    sink_url: str,
    sink_cert: CertificatePaths,
    work: Path,
) -> Outcome:
    script = work / f"{args.api}.lua"
    script.write_text(driver_lua(args.api, key, hook))
    path, kind = APIS[args.api]
    started = time.monotonic()
    output = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{args.connections}",
            f"-d{args.seconds}s",
            "--latency",
            "-s",
            str(script),
            f"{url}{path}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    requests = int(_field(output, r"(\d+) requests in"))
    non_2xx = int(_field(output, r"Non-2xx or 3xx responses:\s+(\d+)", default="0"))
    sent = requests - non_2xx
    deadline = time.monotonic() + max(60.0, args.seconds * 6)
    delivered, last = stats(sink_url, sink_cert, kind)
    while delivered < sent and time.monotonic() < deadline:
        time.sleep(0.2)
        delivered, last = stats(sink_url, sink_cert, kind)
    return Outcome(
        requests=requests,
        request_rps=float(_field(output, r"Requests/sec:\s+([\d.]+)")),
        p50_ms=_latency(output, "50%"),
        p99_ms=_latency(output, "99%"),
        non_2xx=non_2xx,
        delivered=delivered,
        end_to_end_rps=delivered / max(last - started, 1e-9),
    )


def driver_lua(api: str, key: str, hook: str) -> str:
    """wrk's script for `--api`: messages as they always were, verifications keyed."""
    if api == "messages":
        return SEND_LUA.format(key=key, hook=hook)
    # The keyed Lua has braces of its own: put in after format() has run.
    return VERIFY_LUA.format(key=key, hook=hook, keyed="{keyed}").replace(
        "{keyed}", shape_lua("keyed")
    )


def _field(output: str, pattern: str, default: str | None = None) -> str:
    import re

    match = re.search(pattern, output)
    if match is None:
        if default is None:
            raise SystemExit(f"wrk printed no {pattern!r}:\n{output}")
        return default
    return match.group(1)


def _latency(output: str, label: str) -> float:
    import re

    match = re.search(rf"{re.escape(label)}\s+([\d.]+)(us|ms|s)", output)
    if match is None:
        return float("nan")
    value, unit = float(match.group(1)), match.group(2)
    return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value


async def with_peer(args: argparse.Namespace) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="relay-smpp-bench-") as tmp:
        peer_dir = install_peer(Path.home() / ".cache" / "relay-bench")
        peer = await SmppPeer.start(peer_dir, receipt={"stat": "DELIVRD", "form": "tlv"})
        try:
            return await asyncio.to_thread(relay_side, args, Path(tmp), peer.port)
        finally:
            await peer.stop()


def report(args: argparse.Namespace, outcome: Outcome, kannel_rate: float | None) -> None:
    path, kind = APIS[args.api]
    unit = "msg/s" if args.api == "messages" else "verifications/s"
    rows = [
        (f"POST {path}", f"{outcome.request_rps:,.0f} req/s ({outcome.requests} requests)"),
        ("request latency p50 / p99", f"{outcome.p50_ms:.1f} / {outcome.p99_ms:.1f} ms"),
        ("non-2xx answers", str(outcome.non_2xx)),
        ("end to end: request → receipt → webhook", f"{outcome.end_to_end_rps:,.0f} {unit}"),
        # wrk does not count the requests it cut off at the end; Relay served them.
        (f"{kind} webhooks", f"{outcome.delivered} (wrk counted {outcome.requests})"),
    ]
    if kannel_rate is not None:
        rows.append(("Kannel 1.4.5, same SMSC", f"{kannel_rate:,.0f} receipts/s"))
        rows.append(("Relay / Kannel", f"{outcome.end_to_end_rps / kannel_rate:.2f}x"))
    what = "Send API" if args.api == "messages" else "Verifications"
    print(
        f"\n{what} over SMPP, {args.db}, {args.workers} process(es), wrk -c{args.connections} "
        f"for {args.seconds} s, {args.binds} bind(s) x window {args.window}"
    )
    print("| measure | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    if outcome.delivered < outcome.requests - outcome.non_2xx:
        raise SystemExit(f"not every request was reported delivered ({kind})")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--binds", type=int, default=2)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--workers", type=int, default=1, help="relay serve --workers (pg only)")
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument(
        "--api", choices=sorted(APIS), default="messages", help="what wrk posts (default messages)"
    )
    parser.add_argument("--kannel", action="store_true", help="measure Kannel side by side")
    parser.add_argument("--kannel-messages", type=int, default=20000)
    parser.add_argument("--smoke", action="store_true", help="2 seconds, for CI")
    args = parser.parse_args(argv)
    if args.smoke:
        args.seconds, args.connections = 2, 16
    return args


def run(args: argparse.Namespace) -> Outcome:
    """Relay's side of one run (bench/run_all.py calls this; Kannel is measured apart)."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is missing: apt-get install -y wrk")
    return asyncio.run(with_peer(args))


def main() -> None:
    args = parse()
    outcome = run(args)
    kannel_rate = None
    if args.kannel:
        from bench.kannel_reference import measure_kannel

        kannel_rate = measure_kannel(args.kannel_messages)
    report(args, outcome, kannel_rate)


if __name__ == "__main__":
    main()
