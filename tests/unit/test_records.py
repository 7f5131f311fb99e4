"""A frozen record made by `fast_init`'s __init__ is what the dataclass's own makes, and one
copied with fields changed is what dataclasses.replace makes."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

import relay
from relay.delivery.attempts import Attempt, AttemptStatus
from relay.delivery.store import AttemptRow
from relay.records import changed, fast_init
from relay.verifications.models import Status, Verification

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
ATTEMPT = Attempt("att_1", AttemptStatus.QUEUED, "sandbox", NOW, None, livemode=False)
ROW = AttemptRow(
    "att_1", "ver_1", None, "sandbox", AttemptStatus.QUEUED, ("sandbox",), 0, None, ("sms",)
)
VERIFICATION = Verification(
    "ver_1", "acct_1", False, "+14155552671", "US", "Relay", "en", 6, Status.PENDING, 0, 1,
    {"k": "v"}, None, NOW, NOW, NOW, NOW, None, None,
)  # fmt: skip


def test_a_verification_with_attempts_is_the_replaced_one() -> None:
    copied = VERIFICATION.with_attempts((ATTEMPT,))
    assert copied == dataclasses.replace(VERIFICATION, attempts=(ATTEMPT,))
    assert VERIFICATION.attempts == ()
    assert copied.metadata is VERIFICATION.metadata


def test_an_attempt_with_a_status_and_an_answered_row_are_the_replaced_ones() -> None:
    assert ATTEMPT.with_status(AttemptStatus.SENT) == dataclasses.replace(
        ATTEMPT, status=AttemptStatus.SENT
    )
    assert ROW.answered(AttemptStatus.DELIVERED, "c-1") == dataclasses.replace(
        ROW, status=AttemptStatus.DELIVERED, carrier_message_id="c-1"
    )
    assert ATTEMPT.status is AttemptStatus.QUEUED


def test_a_copy_stays_frozen_and_hashes_as_its_equal() -> None:
    copied = ATTEMPT.with_status(AttemptStatus.FAILED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copied.status = AttemptStatus.SENT  # type: ignore[misc]
    assert hash(copied) == hash(dataclasses.replace(ATTEMPT, status=AttemptStatus.FAILED))


def test_a_field_the_record_does_not_have_is_refused() -> None:
    with pytest.raises(TypeError, match="Attempt has no field colour"):
        changed(ATTEMPT, colour="red")


@dataclass(frozen=True)
class Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


@dataclass(frozen=True)
class Derived:
    value: int
    twice: int = field(init=False, default=0)


@pytest.mark.parametrize("record", [Checked(1), Derived(1)])
def test_a_record_its_init_would_check_or_derive_is_not_copied_this_way(record: object) -> None:
    with pytest.raises(TypeError, match=r"Checked|Derived"):
        changed(record, value=2)


def plain_twin() -> Any:
    @dataclass(frozen=True)
    class Twin:
        a: int
        b: str = "b"
        c: list[int] = field(default_factory=list)
        _: KW_ONLY
        d: int
        e: tuple[int, ...] = (1,)

    return Twin


def made_fast() -> Any:
    return fast_init(plain_twin())


def test_a_fast_init_takes_the_same_arguments_and_makes_the_same_record() -> None:
    plain, fast = plain_twin(), made_fast()
    assert inspect.signature(fast.__init__, follow_wrapped=False) == inspect.signature(
        plain.__init__
    )
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {"d": 2}),
        ((1, "x", [3]), {"d": 4, "e": ()}),
    ]
    for args, kwargs in calls:
        assert vars(fast(*args, **kwargs)) == vars(plain(*args, **kwargs))
        assert list(vars(fast(*args, **kwargs))) == ["a", "b", "c", "d", "e"]
    assert repr(fast(1, d=2)).removeprefix(fast.__qualname__) == repr(plain(1, d=2)).removeprefix(
        plain.__qualname__
    )


def test_a_fast_init_gives_each_record_a_fresh_default_and_stays_frozen() -> None:
    fast = made_fast()
    first, second = fast(1, d=2), fast(1, d=2)
    assert first == second
    assert first.c == []
    assert first.c is not second.c
    assert hash(ATTEMPT) == hash(
        Attempt(*(getattr(ATTEMPT, f.name) for f in dataclasses.fields(Attempt)))
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.a = 2
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'd'"):
        fast(1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        fast(1, d=2, z=3)


def test_a_record_that_is_not_frozen_keeps_its_own_init() -> None:
    @dataclass
    class Mutable:
        a: int

    with pytest.raises(TypeError, match="not frozen"):
        fast_init(Mutable)


def is_fast_record(kind: Any) -> bool:
    init = vars(kind).get("__init__") if isinstance(kind, type) else None
    return hasattr(init, "__wrapped__") and dataclasses.is_dataclass(kind)


def fast_records() -> list[Any]:
    """Every record of Relay's made by a fast_init."""
    found: dict[str, Any] = {}
    for module in pkgutil.walk_packages(relay.__path__, "relay."):
        if ".migrations" in module.name:
            continue
        for kind in vars(importlib.import_module(module.name)).values():
            if is_fast_record(kind):
                found[f"{kind.__module__}.{kind.__qualname__}"] = kind
    return [found[name] for name in sorted(found)]


FAST = fast_records()


def test_the_hot_records_are_made_fast() -> None:
    names = {kind.__qualname__ for kind in FAST}
    assert {"Verification", "Attempt", "AttemptRow", "Destination", "Draft"} <= names


@pytest.mark.parametrize("kind", FAST, ids=lambda kind: kind.__qualname__)
def test_each_fast_record_is_made_as_its_dataclass_would_make_it(kind: Any) -> None:
    own = kind.__init__.__wrapped__
    assert inspect.signature(kind.__init__, follow_wrapped=False) == inspect.signature(own)
    values: dict[str, Any] = {
        each.name: object()
        for each in dataclasses.fields(kind)
        if each.default is dataclasses.MISSING and each.default_factory is dataclasses.MISSING
    }
    made, expected = kind(**values), object.__new__(kind)
    own(expected, **values)
    assert vars(made) == vars(expected)
    assert list(vars(made)) == list(vars(expected))
