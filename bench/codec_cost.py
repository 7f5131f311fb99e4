"""What the request codec costs per create and per check, and what msgspec's would.

The codec is what msgspec would take over: the body decoded and checked
(`relay.web.bodies.decode_json`), validated into its pydantic model, and the
verification built as a dict (`to_api`) and encoded with orjson, once for the
answer and once for each event that carries it. Each piece is timed alone in a
loop (`time.process_time`, best of `--repeat`), on a real verification made
through the app, and how many `to_api` calls a create and a check make is
counted on real requests. With msgspec installed (it is not a dependency:
`.venv/bin/pip install msgspec`), its equivalents are timed the same way:
`msgspec.json.decode` into a Struct with the same constraints, and
`msgspec.json.encode` of a Struct built from the verification. The difference is
the most a msgspec rewrite of the request path could save; divide it by
`bench/request_profile.py`'s CPU per request.

Usage:
  .venv/bin/python bench/codec_cost.py [--loops 20000] [--repeat 5]
  .venv/bin/python bench/codec_cost.py --smoke
"""

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402
from bench.in_process import bench_settings, call, number  # noqa: E402
from bench.request_profile import ID, idempotency_key  # noqa: E402

from relay.db.migrate import upgrade  # noqa: E402
from relay.services import build_services  # noqa: E402
from relay.verifications.models import CHECK_LIMIT, Status, Verification  # noqa: E402
from relay.web.app import create_app  # noqa: E402
from relay.web.bodies import decode_json  # noqa: E402
from relay.web.schemas import (  # noqa: E402
    E164_PATTERN,
    CheckVerificationBody,
    CreateVerificationBody,
)

try:
    import msgspec
except ImportError:  # measured only where it is installed
    msgspec = None


def best(work: Callable[[], Any], loops: int, repeat: int) -> float:
    """µs of CPU per call of `work`, the best of `repeat` runs of `loops` calls."""
    runs = []
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(loops):
            work()
        runs.append((time.process_time() - started) / loops * 1e6)
    return min(runs)


async def sample() -> tuple[bytes, bytes, Verification, datetime, dict[str, float]]:
    """A create body, a check body, the verification they made, and `to_api` calls
    per create and per check, counted on real keyed requests."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = bench_settings(argparse.Namespace(db="sqlite"), Path(tmp))
        upgrade(settings.resolved_database_url)
        services = build_services(settings)
        key = (await services.accounts.create_account("Bench")).test_key
        app = create_app(services)
        counts = {"create": 0.0, "check": 0.0}
        original = Verification.to_api
        phase = "create"

        def counted(self: Verification, now: datetime) -> dict[str, Any]:
            counts[phase] += 1
            return original(self, now)

        Verification.to_api = counted  # type: ignore[method-assign]
        create_body = number()
        async with app.router.lifespan_context(app):
            headers = [(b"idempotency-key", idempotency_key())]
            status, answer = await call(app, "POST", "/v1/verifications", create_body, key, headers)
            assert status == 200, answer
            found = ID.search(answer)
            assert found is not None, answer
            check_body = b'{"id":"%s","code":"000000"}' % found.group(1)
            phase = "check"
            headers = [(b"idempotency-key", idempotency_key())]
            path = "/v1/verifications/check"
            status, answer = await call(app, "POST", path, check_body, key, headers)
            assert status == 200, answer
            Verification.to_api = original  # type: ignore[method-assign]
            caller = await services.accounts.authenticate(key)
            verification = await services.verifications.retrieve(caller, found.group(1).decode())
            now = services.clock.now()
    return create_body, check_body, verification, now, counts


def msgspec_codec() -> tuple[Callable[[bytes], Any], Callable[[bytes], Any], Callable[..., bytes]]:
    """Decoders for the two bodies and an encoder of the verification, in msgspec."""
    assert msgspec is not None
    meta = msgspec.Meta
    text = Annotated[str, meta(min_length=1, max_length=40)]
    value = Annotated[str, meta(max_length=500)]

    class CreateBody(msgspec.Struct, forbid_unknown_fields=True):
        to: Annotated[str, meta(pattern=E164_PATTERN)]
        webhook_url: Annotated[str, meta(max_length=2048)] | None = None
        metadata: Annotated[dict[text, value], meta(max_length=20)] = msgspec.field(
            default_factory=dict
        )
        code_length: Annotated[int, meta(ge=4, le=10)] = 6
        ttl: Annotated[int, meta(ge=60, le=3600)] = 600
        locale: Annotated[str, meta(min_length=2, max_length=35)] = "en"

    class CheckBody(msgspec.Struct, forbid_unknown_fields=True):
        code: Annotated[str, meta(min_length=1, max_length=20)]
        id: str | None = None
        to: Annotated[str, meta(pattern=E164_PATTERN)] | None = None

    class AttemptOut(msgspec.Struct):
        id: str
        object: str
        livemode: bool
        status: str
        carrier: str
        at: datetime
        error: dict[str, Any] | None

    class VerificationOut(msgspec.Struct):
        id: str
        object: str
        livemode: bool
        status: str
        to: str
        country: str | None
        sender: str | None
        locale: str
        code_length: int
        verified: bool
        remaining_checks: int
        attempts: list[AttemptOut]
        metadata: dict[str, str]
        webhook_url: str | None
        created_at: datetime
        updated_at: datetime
        expires_at: datetime
        approved_at: datetime | None
        canceled_at: datetime | None

    encoder = msgspec.json.Encoder()
    create = msgspec.json.Decoder(CreateBody)
    check = msgspec.json.Decoder(CheckBody)

    def encode(v: Verification, now: datetime) -> bytes:
        status = v.status_at(now)
        attempts = [
            AttemptOut(a.id, "attempt", a.livemode, a.status.value, a.carrier, a.at, a.error)
            for a in v.attempts
        ]
        out = VerificationOut(
            v.id, "verification", v.livemode, status.value, v.to, v.country, v.sender,
            v.locale, v.code_length, status is Status.APPROVED,
            max(0, CHECK_LIMIT - v.checks), attempts, dict(v.metadata), v.webhook_url,
            v.created_at, v.updated_at, v.expires_at, v.approved_at, v.canceled_at,
        )  # fmt: skip
        return encoder.encode(out)

    return create.decode, check.decode, encode


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--loops", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="a few loops, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.loops, args.repeat = 200, 1
    create_body, check_body, verification, now, counts = asyncio.run(sample())
    n, r = args.loops, args.repeat
    pieces = {
        "decode + validate, create body": best(
            lambda: CreateVerificationBody.model_validate(decode_json(create_body)), n, r
        ),
        "decode + validate, check body": best(
            lambda: CheckVerificationBody.model_validate(decode_json(check_body)), n, r
        ),
        "to_api + orjson.dumps, one verification": best(
            lambda: orjson.dumps(verification.to_api(now)), n, r
        ),
    }
    if msgspec is not None:
        create, check, encode = msgspec_codec()
        create(create_body), check(check_body), encode(verification, now)  # they accept them
        pieces["msgspec: decode + validate, create body"] = best(lambda: create(create_body), n, r)
        pieces["msgspec: decode + validate, check body"] = best(lambda: check(check_body), n, r)
        pieces["msgspec: Struct + encode, one verification"] = best(
            lambda: encode(verification, now), n, r
        )
    print(f"to_api per create {counts['create']:.0f}, per check {counts['check']:.0f}")
    print(f"{'piece':46} {'µs CPU':>7}")
    for name, cost in pieces.items():
        print(f"{name:46} {cost:7.2f}")
    for name, body in (("create", "create body"), ("check", "check body")):
        now_cost = (
            pieces[f"decode + validate, {body}"]
            + counts[name] * pieces["to_api + orjson.dumps, one verification"]
        )
        line = f"codec per {name}: {now_cost:.1f} µs"
        if msgspec is not None:
            then = (
                pieces[f"msgspec: decode + validate, {body}"]
                + counts[name] * pieces["msgspec: Struct + encode, one verification"]
            )
            line += f"; with msgspec {then:.1f} µs; at most {now_cost - then:.1f} µs saved"
        print(line)


if __name__ == "__main__":
    main()
