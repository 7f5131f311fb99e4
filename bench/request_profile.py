"""The production request shape in process: CPU per keyed create and check, and where it goes.

Creates (`POST /v1/verifications`) and checks by id (`POST /v1/verifications/check`,
a wrong code, so the verification stays pending), each with an `Idempotency-Key` as
relay-client sends it, through the real app (every middleware, the router, the
services, the sandbox carrier) over a fresh SQLite database, `--concurrency` in
flight, on uvloop as `relay serve` runs. No TLS, socket or HTTP server: what the app
costs. Three ways to count:

* default: CPU time of this process per request (`time.process_time`), creates and
  checks measured apart after a warm-up;
* `--layers`: deterministic profile (cProfile) of the same run, self time grouped by
  layer (HTTP framework, validation, JSON, idempotency, data layer, crypto, ...),
  and the inclusive time of request decoding, validation and response encoding;
  cProfile's own cost inflates Python calls against C calls, so shares, not µs;
* `--instructions`: the run under `valgrind --tool=callgrind`, instrumented only
  while the measured creates and checks run (client requests switch it on, zero
  and dump around each phase, `bench/callgrind_marks.py`; start-up and warm-up run
  uninstrumented): instructions per create and per check, whatever the machine's
  load. `bench/budget.py` counts every budgeted operation this way.

`PYTHONPATH=/other/src` measures another tree of the code (a compiled build, an
older commit); the path of the `relay` package measured is printed.

Usage:
  .venv/bin/python bench/request_profile.py [--calls 2000] [--concurrency 16]
  .venv/bin/python bench/request_profile.py --layers
  .venv/bin/python bench/request_profile.py --instructions [--calls 200]
  .venv/bin/python bench/request_profile.py --smoke          # each mode briefly, for CI
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.budget_workload import WRONG_CODE  # noqa: E402
from bench.callgrind_marks import Marks, command, totals  # noqa: E402
from bench.in_process import App, bench_settings, call, number  # noqa: E402
from bench.webhook_bench import _loop_factory  # noqa: E402

import relay  # noqa: E402
from relay.db.migrate import upgrade  # noqa: E402
from relay.services import build_services  # noqa: E402
from relay.web.app import create_app  # noqa: E402

# Self time by layer: the first rule whose fragment is in the profile entry's file
# (or, for a C function, its description) names its layer.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("harness (this script)", ("bench/",)),
    ("idempotency (middleware, claims, store)", ("relay/web/idempotency", "relay/idempotency/")),
    ("JSON (json, orjson)", ("json/", "orjson", "_json", "bodies.py:decode", "bodies.py:_")),
    ("JSON (json, orjson)", ("relay/web/responses",)),
    ("validation (pydantic)", ("pydantic",)),
    ("HTTP framework (Starlette)", ("starlette/",)),
    ("relay.web (middleware, dispatch, callers, routes)", ("relay/web/",)),
    ("data layer (relay.db)", ("relay/db/",)),
    ("SQLite (C)", ("sqlite3",)),
    ("crypto (HMAC, AES, hashlib)", ("relay/crypto", "hmac", "hashlib", "cryptography")),
    ("verifications (use case, stores)", ("relay/verifications/",)),
    ("accounts (key lookup)", ("relay/accounts/",)),
    ("abuse guard", ("relay/abuse/",)),
    (
        "events, delivery, carriers, sms",
        ("relay/events/", "relay/delivery/", "relay/carriers/", "relay/sms/", "relay/webhooks/"),
    ),
    ("ids, phone numbers", ("relay/ids", "relay/phone", "phonenumbers", "secrets", "random")),
    ("metrics, logging", ("relay/metrics", "prometheus", "relay/log", "logging/", "contextvars")),
    ("relay, other", ("relay/",)),
    ("dataclasses, datetime, typing", ("dataclasses", "datetime", "typing", "enum", "abc.py")),
    ("event loop (uvloop, asyncio)", ("uvloop", "asyncio", "coroutine", "Task", "Future")),
]

# Inclusive time of what msgspec could take over, counted generously: the body
# decoded and checked as JSON, validated into its model, the answer built as a dict
# and encoded, and the JSON the data layer and the events write and read.
CODEC = [
    ("relay/web/bodies.py", "decode_json"),
    ("relay/web/dispatch.py", "_body"),
    ("relay/web/responses.py", "render"),
    ("relay/verifications/models.py", "to_api"),
]
# (callee, caller): a JSON call's inclusive time from one caller only.
CODEC_CALLS = [
    ("json/__init__.py:dumps", "relay/db/sql.py:bind"),
    ("json/__init__.py:loads", "relay/db/sql.py:document"),
    ("~:<built-in method orjson.dumps>", "relay/events/store.py:"),
    ("~:<built-in method orjson.loads>", "relay/events/store.py:"),
]


def entry(filename: str, function: str) -> str:
    """A profile entry as the layer rules read it: `file:function`, or a C function's
    description."""
    return function if filename == "~" else f"{filename}:{function}"


def layer_of(where: str) -> str:
    for name, fragments in LAYERS:
        if any(fragment in where for fragment in fragments):
            return name
    return "other (builtins)"


def idempotency_key() -> bytes:
    """As relay-client makes one: `rc_` and 32 hex digits."""
    return f"rc_{secrets.token_hex(16)}".encode()


ID = re.compile(rb'"id":"(ver_[0-9A-Z]{26})"')


async def run(args: argparse.Namespace, settings: Any) -> dict[str, float]:
    """Warm up, then `args.calls` creates and `args.checks` checks; CPU µs per call.
    Bodies and keys are made before each timed phase, so no JSON of this script's
    is timed or profiled with Relay's."""
    services = build_services(settings)
    key = (await services.accounts.create_account("Bench")).test_key
    app: App = create_app(services)
    ids: list[str] = []
    gate = asyncio.Semaphore(args.concurrency)

    async def post(path: str, body: bytes) -> bytes:
        async with gate:
            status, answer = await call(
                app, "POST", path, body, key, [(b"idempotency-key", idempotency_key())]
            )
        assert status == 200, answer
        return answer

    async def creates(n: int) -> None:
        bodies = [number() for _ in range(n)]
        await start()
        answers = await asyncio.gather(*(post("/v1/verifications", body) for body in bodies))
        await stop("create", n)
        for answer in answers:
            found = ID.search(answer)
            assert found is not None, answer
            ids.append(found.group(1).decode())

    async def checks(n: int) -> None:
        # A wrong code: the verification stays pending, every check does the same work.
        code = WRONG_CODE.encode()
        bodies = [b'{"id":"%s","code":"%s"}' % (ids.pop().encode(), code) for _ in range(n)]
        await start()
        await asyncio.gather(*(post("/v1/verifications/check", body) for body in bodies))
        await stop("check", n)

    used: dict[str, float] = {}
    profile = cProfile.Profile() if args.layers else None
    marks = Marks.build(args.callgrind) if args.callgrind else None
    timing = False
    started = 0.0

    async def start() -> None:
        nonlocal started
        if timing:
            if marks is not None:
                marks.start()
            if profile is not None:
                profile.enable()
            started = time.process_time()

    async def stop(name: str, n: int) -> None:
        if timing:
            used[name] = (time.process_time() - started) / n * 1e6
            if profile is not None:
                profile.disable()
            if marks is not None:
                marks.dump(name)

    async with app.router.lifespan_context(app):
        await creates(args.warmup + args.checks)
        await checks(args.warmup)
        timing = True
        await creates(args.calls)
        await checks(args.checks)
        if profile is not None:
            print_layers(profile, args.calls + args.checks, args.top)
    return used


def print_layers(profile: cProfile.Profile, calls: int, top: int) -> None:
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    by_layer: Counter[str] = Counter()
    for (filename, _, function), (_, _, own, _, _) in stats.items():
        by_layer[layer_of(entry(filename, function))] += own
    total = sum(by_layer.values())
    print(f"\nSelf time by layer (cProfile, {calls} calls, creates and checks):")
    print(f"{'layer':52} {'share':>6}")
    for name, seconds in by_layer.most_common():
        print(f"{name:52} {seconds / total:6.1%}")
    if top:
        print(f"\nTop {top} by self time:")
        ranked = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
        for (filename, line, function), (_, _, own, inclusive, _) in ranked:
            name = layer_of(entry(filename, function))[:20]
            where = f"{filename.split('site-packages/')[-1]}:{line} {function}"
            print(f"{own / total:6.1%} {inclusive / total:6.1%}  {name:20} {where[-80:]}")
    codec = 0.0
    for (filename, _, function), (_, _, _, inclusive, callers) in stats.items():
        where = f"{filename}:{function}"
        if any(filename.endswith(path) and function == name for path, name in CODEC):
            codec += inclusive
        for callee, caller in CODEC_CALLS:
            if where.endswith(callee) or where == callee:
                for (file, _, name), (_, _, _, from_caller) in callers.items():
                    if f"{file}:{name}".endswith(caller) or caller in f"{file}:{name}":
                        codec += from_caller
    print(
        f"{'decode + validate + encode (inclusive)':52} {codec / total:6.1%}"
        "   (what msgspec could replace, at most)"
    )


def instructions(args: argparse.Namespace) -> None:
    """Instructions per create and per check: this script under callgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        options = ["--calls", str(args.calls), "--checks", str(args.checks)]
        options += ["--warmup", str(args.warmup), "--concurrency", str(args.concurrency)]
        run = command(Path(tmp), __file__, "--callgrind", tmp, *options)
        done = subprocess.run(run, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(done.stdout + done.stderr[-3000:])
        found = totals(Path(tmp))
    print(done.stdout.strip())
    print(
        f"instructions per create {found['create'] / args.calls:,.0f}, "
        f"per check {found['check'] / args.checks:,.0f} "
        f"(callgrind; {args.calls} creates, {args.checks} checks, {args.concurrency} in flight)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="creates measured")
    parser.add_argument("--checks", type=int, help="checks measured (default: --calls)")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--layers", action="store_true", help="self time by layer (cProfile)")
    parser.add_argument("--top", type=int, default=0, help="with --layers: the N largest entries")
    parser.add_argument("--instructions", action="store_true", help="under callgrind")
    parser.add_argument("--callgrind", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true", help="each mode briefly, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.calls, args.warmup, args.layers = 20, 5, True
    args.checks = args.calls if args.checks is None else args.checks
    print(f"relay from {Path(relay.__file__).parent}", flush=True)
    if args.instructions:
        instructions(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        settings = bench_settings(argparse.Namespace(db="sqlite"), Path(tmp))
        upgrade(settings.resolved_database_url)
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            used = runner.run(run(args, settings))
    print(
        f"µs CPU per create {used['create']:,.0f}, per check {used['check']:,.0f} "
        f"(process time; {args.calls} creates, {args.checks} checks, "
        f"{args.concurrency} in flight, load {os.getloadavg()[0]:.1f})"
    )
    if args.smoke and shutil.which("valgrind"):
        args.calls = args.checks = args.warmup = 2
        instructions(args)


if __name__ == "__main__":
    main()
