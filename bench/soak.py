"""Soak: mixed traffic against `relay serve` for a while, then the database's invariants
and the server's memory.

Starts two SMSCs (node-smpp, the test suite's peer), a webhook receiver in a
process of its own (bench/webhook_sink.py: `/ok` answers 204, `/fail` 500) and
`relay serve` with the route `first, second`. For `--minutes`, `--clients`
loops send, at about `--rate` operations a second in all: test-key
verifications (the sandbox, some to its number whose first carrier fails) with
wrong and right checks and cancels, live verifications and Send API messages
over SMPP, idempotent replays, webhooks to both endpoints. Every
`--flip-every` seconds the first SMSC switches between accepting and refusing
submits, so live sends fail over. Any 5xx or unanswered request counts as an
error. Then it waits for work in flight to settle and checks the database
(bench/soak_checks.py) and the RSS of the server, sampled from /proc.

  .venv/bin/python bench/soak.py --minutes 30        # the documented run
  .venv/bin/python bench/soak.py --smoke             # about 20 s, for CI
  .venv/bin/python bench/soak.py --db pg --pg-url postgresql://127.0.0.1:5432/relay_soak

Exits non-zero on an error answer, a violated invariant or memory growth over
`--max-growth-mb` between the first and last quarter of the run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import ssl
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.serving import bench_account  # noqa: E402
from bench.smpp_bench import recreate_pg, relay_process, sink  # noqa: E402
from bench.soak_checks import verdict  # noqa: E402
from tests.carriers.smpp_peer import SmppPeer, install_peer  # noqa: E402

from relay.tls import ensure_self_signed  # noqa: E402

RELAY = str(ROOT / ".venv" / "bin" / "relay")
ESME_RSUBMITFAIL = 0x45
DELIVERED = {"stat": "DELIVRD", "form": "tlv"}
SCHEDULE = "0.5,1,2"
MAX_CHECKS = 5
MAX_SENDS = 5
SANDBOX_FAILOVER = "+15005550001"
# A verification's right code: known, unknown, or read from what the SMSC received.
Code = str | None | Callable[[str], str | None]


@dataclass
class Tally:
    answers: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    rss_kb: list[tuple[float, int]] = field(default_factory=list)

    def note(self, what: str, response: httpx.Response) -> httpx.Response:
        code = ""
        if 400 <= response.status_code < 500:
            code = " " + str(response.json().get("error", {}).get("code"))
        self.answers[f"{what} {response.status_code}{code}"] += 1
        if response.status_code >= 500:
            self.errors.append(f"{what}: {response.status_code} {response.text[:200]}")
        return response


@dataclass
class Traffic:
    test: httpx.AsyncClient
    live: httpx.AsyncClient
    hooks: str
    first: SmppPeer
    tally: Tally
    rng: random.Random

    def number(self) -> str:
        return f"+1415{self.rng.randrange(2_000_000, 9_999_999):07d}"

    def hook(self) -> str:
        return f"{self.hooks}/{'fail' if self.rng.random() < 0.2 else 'ok'}"

    async def verification(self, client: httpx.AsyncClient, to: str, code: Code) -> None:
        body = {"to": to, "webhook_url": self.hook()}
        made = self.tally.note("create", await client.post("/v1/verifications", json=body))
        if made.status_code != 200:
            return
        vid = made.json()["id"]
        right = code if isinstance(code, str) or code is None else code(to)
        for _ in range(self.rng.choice([0, 0, 1, 2, MAX_CHECKS + 1])):
            wrong = {"id": vid, "code": f"{self.rng.randrange(10**6):06d}"}
            if wrong["code"] == right:
                continue
            self.tally.note("check", await client.post("/v1/verifications/check", json=wrong))
        ending = self.rng.random()
        if ending < 0.1:
            self.tally.note("cancel", await client.post(f"/v1/verifications/{vid}/cancel"))
        elif ending < 0.8 and right is not None:
            body = {"id": vid, "code": right}
            self.tally.note("check", await client.post("/v1/verifications/check", json=body))
        if self.rng.random() < 0.2:
            self.tally.note("retrieve", await client.get(f"/v1/verifications/{vid}"))

    def sent_code(self, to: str) -> str | None:
        """The code as the first SMSC received it (refused or not), if it got there."""
        for event in reversed(self.first.events):
            if event.get("event") == "submit" and event.get("destination_addr") == to[1:]:
                found = re.search(r"\b(\d{6})\b", str(event.get("text")))
                return found.group(1) if found else None
        return None

    async def live_verification(self) -> None:
        await self.verification(self.live, self.number(), self.sent_code)

    async def message(self) -> None:
        body = {"to": self.number(), "code": f"{self.rng.randrange(10**6):06d}"}
        body["webhook_url"] = self.hook()
        self.tally.note("send", await self.live.post("/v1/messages", json=body))

    async def replay(self) -> None:
        key = f"soak-{self.rng.getrandbits(64):x}"
        body = {"to": self.number()}
        headers = {"Idempotency-Key": key}
        first = self.tally.note(
            "create", await self.test.post("/v1/verifications", json=body, headers=headers)
        )
        again = self.tally.note(
            "replay", await self.test.post("/v1/verifications", json=body, headers=headers)
        )
        if first.status_code == 200 and (
            again.content != first.content or again.headers.get("idempotent-replayed") != "true"
        ):
            self.tally.errors.append(f"replay of {key} differs: {again.text[:200]}")

    async def one(self) -> None:
        pick = self.rng.random()
        if pick < 0.3:
            await self.verification(self.test, self.number(), "000000")
        elif pick < 0.4:
            await self.verification(self.test, SANDBOX_FAILOVER, "000000")
        elif pick < 0.6:
            await self.live_verification()
        elif pick < 0.9:
            await self.message()
        else:
            await self.replay()


async def drive(traffic: Traffic, args: argparse.Namespace, pid: int) -> None:
    stop_at = time.monotonic() + args.seconds
    pause = args.clients / args.rate

    async def client_loop() -> None:
        while time.monotonic() < stop_at:
            started = time.monotonic()
            try:
                await traffic.one()
            except httpx.TransportError as error:
                traffic.tally.errors.append(f"no answer: {error!r}")
            await asyncio.sleep(max(0.0, pause - (time.monotonic() - started)))

    async def flipper() -> None:
        failing = False
        while time.monotonic() < stop_at:
            await asyncio.sleep(min(args.flip_every, max(0.0, stop_at - time.monotonic())))
            failing = not failing and time.monotonic() < stop_at
            submit = {"submit": "status", "status": ESME_RSUBMITFAIL} if failing else {}
            await traffic.first.command("configure", **{"submit": "accept", **submit})

    async def sampler() -> None:
        started = time.monotonic()
        while time.monotonic() < stop_at:
            traffic.tally.rss_kb.append((time.monotonic() - started, rss_kb(pid)))
            await asyncio.sleep(args.sample_every)

    await asyncio.gather(*(client_loop() for _ in range(args.clients)), flipper(), sampler())


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def growth_mb(samples: list[tuple[float, int]]) -> tuple[float, float, float]:
    """Median RSS of the second and of the last quarter (the first is warm-up), and peak."""
    values = [kb for _, kb in samples]
    quarter = max(1, len(values) // 4)
    early = statistics.median(values[quarter : 2 * quarter] or values)
    late = statistics.median(values[-quarter:])
    return early / 1024, late / 1024, max(values) / 1024


def environment(args: argparse.Namespace, work: Path, ports: tuple[int, int]) -> dict[str, str]:
    config = work / "relay.toml"
    carriers = "".join(
        f'[carriers.{name}]\nkind = "smpp"\nhost = "127.0.0.1"\nport = {port}\n'
        'system_id = "relay"\npassword = "secret"\nreconnect_backoff = [0.1, 0.5]\n'
        "receipt_timeout = 5.0\n"
        for name, port in zip(("first", "second"), ports, strict=True)
    )
    config.write_text(carriers + '[routes]\ndefault = ["first", "second"]\n')
    data = work / "relay"
    data.mkdir(parents=True, exist_ok=True)
    url = args.pg_url if args.db == "pg" else f"sqlite:///{data / 'relay.sqlite3'}"
    return {
        **os.environ,
        "RELAY_CONFIG": str(config),
        "RELAY_DATA_DIR": str(data),
        "RELAY_DATABASE_URL": url,
        "RELAY_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
        "RELAY_WEBHOOK_RETRY_SCHEDULE": SCHEDULE,
        "RELAY_WEBHOOK_TIMEOUT": "2",
        "RELAY_DEFAULT_TTL": "60",
        "RELAY_RESEND_INTERVAL": "0",
        "RELAY_PUMPING_GUARD": "off",
        "RELAY_DAILY_SMS_CAP": "100000000",
        "RELAY_NUMBER_VERIFICATIONS_PER_HOUR": "1000000",
        "RELAY_NUMBER_FAILED_CHECKS_PER_DAY": "1000000",
        "RELAY_RATE_LIMIT": "100000",
        "RELAY_RATE_LIMIT_BURST": "100000",
        "RELAY_LOG_LEVEL": "error",
    }


async def soak(args: argparse.Namespace, work: Path) -> tuple[Tally, Any]:
    peer_dir = install_peer(Path.home() / ".cache" / "relay-bench")
    first = await SmppPeer.start(peer_dir, receipt=DELIVERED)
    second = await SmppPeer.start(peer_dir, receipt=DELIVERED)
    try:
        env = environment(args, work, (first.port, second.port))
        if args.db == "pg":
            recreate_pg(env["RELAY_DATABASE_URL"])
        hook_cert = ensure_self_signed(work / "sink-tls")
        env["RELAY_WEBHOOK_CA_BUNDLE"] = str(hook_cert.cert)
        account = bench_account(RELAY, env)
        tally = Tally()
        with sink(hook_cert) as hooks, relay_process(env, work / "relay", 1) as (url, pid):
            context = ssl.create_default_context(cafile=str(work / "relay" / "tls" / "cert.pem"))

            def client(key: str) -> httpx.AsyncClient:
                headers = {"Authorization": f"Bearer {key}"}
                limits = httpx.Limits(max_connections=args.clients)
                return httpx.AsyncClient(
                    base_url=url, verify=context, headers=headers, timeout=30, limits=limits
                )

            async with client(account["test_key"]) as test, client(account["live_key"]) as live:
                rng = random.Random(args.seed)
                traffic = Traffic(test, live, hooks, first, tally, rng)
                await drive(traffic, args, pid)
            found = await verdict(
                env["RELAY_DATABASE_URL"],
                max_checks=MAX_CHECKS,
                max_sends=MAX_SENDS,
                schedule=len(SCHEDULE.split(",")),
                grace=30.0,
                settle_within=60.0,
            )
            tally.rss_kb.append((float(args.seconds), rss_kb(pid)))
        return tally, found
    finally:
        await first.stop()
        await second.stop()


def report(args: argparse.Namespace, tally: Tally, found: Any) -> bool:
    early, late, peak = growth_mb(tally.rss_kb)
    violated = {name: rows for name, rows in found.violations.items() if rows}
    print(f"\nSoak, {args.db}, {args.seconds:.0f} s, {args.clients} clients, ~{args.rate}/s")
    print("| measure | value |\n|---|---|")
    print(f"| requests | {sum(tally.answers.values())} |")
    for name, count in sorted(tally.answers.items()):
        print(f"| {name} | {count} |")
    for name, count in found.totals.items():
        print(f"| {name} | {count} |")
    print(f"| unsettled after the wait | {found.unsettled} |")
    print(
        f"| RSS second quarter / last quarter / peak | {early:.1f} / {late:.1f} / {peak:.1f} MB |"
    )
    print(f"| errors (5xx, no answer, bad replay) | {len(tally.errors)} |")
    print(f"| invariants violated | {len(violated)} of {len(found.violations)} |")
    for error in tally.errors[:10]:
        print(f"error: {error}")
    for name, rows in violated.items():
        print(f"violated: {name}: {len(rows)}, e.g. {rows[:5]}")
    grew = late - early > args.max_growth_mb
    if grew:
        print(f"memory grew {late - early:.1f} MB, over {args.max_growth_mb} MB")
    return not (tally.errors or violated or grew)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rate", type=float, default=40.0, help="operations per second in all")
    parser.add_argument("--flip-every", type=float, default=20.0)
    parser.add_argument("--sample-every", type=float, default=5.0)
    parser.add_argument("--max-growth-mb", type=float, default=50.0)
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--pg-url", default="postgresql://127.0.0.1:5432/relay_soak")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--smoke", action="store_true", help="about 20 s, for CI")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args(argv)
    args.seconds = args.minutes * 60
    if args.smoke:
        args.seconds, args.flip_every, args.sample_every = 12.0, 4.0, 1.0
    return args


def main() -> None:
    args = parse()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        tally, found = asyncio.run(soak(args, args.keep))
    else:
        with tempfile.TemporaryDirectory(prefix="relay-soak-") as tmp:
            tally, found = asyncio.run(soak(args, Path(tmp)))
    if not report(args, tally, found):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
