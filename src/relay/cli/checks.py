"""What is wrong with a configuration, every problem at once: `relay config check` and
the refusals of `relay serve` and `relay worker`."""

from __future__ import annotations

import ipaddress
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from relay.carriers.registry import (
    carrier_problems,
    live_carrier_problems,
    route_names,
    sandbox_carriers,
)
from relay.config import (
    LIVE_DELETE_AFTER_FLOOR,
    Settings,
    given_values,
    read_file,
    unknown_keys,
)

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
# Values the example file and the docs show for secrets: never real ones.
PLACEHOLDER_SECRETS = frozenset({"", "secret", "password", "…", "...", "changeme"})
# The carrier settings that hold a credential, across SMPP, every HTTP provider and WhatsApp.
CARRIER_SECRETS = (
    "password",
    "auth_token",
    "api_key",
    "api_secret",
    "signature_secret",
    "callback_secret",
    "access_token",
    "app_secret",
    "verify_token",
)


@dataclass
class Checked:
    """The settings, when they could be built, and every problem found on the way."""

    settings: Settings | None
    problems: list[str] = field(default_factory=list)


def check(overrides: dict[str, Any]) -> Checked:
    """Settings as `load_settings` builds them (flags > env > file > defaults), checked."""
    given = given_values(overrides)
    try:
        explicit = Settings(**given)
    except ValidationError as error:
        return Checked(None, _validation_problems(error))
    if explicit.config is None:
        return _checked(explicit.model_dump(exclude_unset=True), [])
    try:
        values = read_file(explicit.config)
    except OSError as error:
        return Checked(None, [f"{explicit.config}: cannot be read ({error.strerror})"])
    except tomllib.TOMLDecodeError as error:
        return Checked(None, [f"{explicit.config}: not valid TOML ({error})"])
    problems = [f"{key}: no such setting" for key in unknown_keys(values)]
    known = {k: v for k, v in values.items() if k in Settings.model_fields}
    return _checked({**known, **explicit.model_dump(exclude_unset=True)}, problems)


def check_file(path: Path) -> Checked:
    """`relay config check`: the file with RELAY_* applied, live mode's refusals included."""
    checked = check({"config": path})
    if checked.settings is not None and checked.settings.mode == "live":
        checked.problems += unsafe_for_live(checked.settings)
    return checked


def _checked(values: dict[str, Any], problems: list[str]) -> Checked:
    try:
        settings = Settings(**values)
    except ValidationError as error:
        # Checked again without the wrong values, so the carriers and routes
        # are reported in the same run; the settings stay unusable.
        wrong = {item["loc"][0] for item in error.errors() if item["loc"]} & values.keys()
        found = problems + _validation_problems(error)
        if wrong:
            found += _checked({k: v for k, v in values.items() if k not in wrong}, []).problems
        return Checked(None, found)
    return Checked(settings, problems + carrier_problems(settings))


def _validation_problems(error: ValidationError) -> list[str]:
    found = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "settings"
        found.append(f"{where}: {item['msg']}")
    return found


def unsafe_for_live(settings: Settings, *, demo: bool = False) -> list[str]:
    """Settings safe on a developer's machine that must not reach real people's phones."""
    unsafe = [
        f"routes.{country} sends live SMS to the sandbox carrier {name!r}"
        for country, value in settings.routes.items()
        for name in route_names(country, value)
        if name in sandbox_carriers(settings)
    ]
    unsafe += [
        f"channel_routes.{channel} sends live messages to the sandbox carrier {name!r}"
        for channel, names in settings.channel_routes.items()
        if isinstance(names, list)
        for name in names
        if name in sandbox_carriers(settings)
    ]
    unsafe += [
        f"webhook_allowed_networks lets webhooks reach loopback ({network})"
        for network in settings.webhook_allowed_networks
        if any(network.overlaps(loopback) for loopback in LOOPBACK)
    ]
    if settings.code_key is not None and _placeholder(settings.code_key):
        unsafe.append("code_key is the example's placeholder; set a random one")
    elif settings.code_key is not None and len(settings.code_key.encode()) < 32:
        unsafe.append("code_key is shorter than 32 bytes")
    unsafe += [
        f"carriers.{name}.{key} is a placeholder secret"
        for name, table in settings.carriers.items()
        for key in CARRIER_SECRETS
        if isinstance(table.get(key), str) and _placeholder(table[key])
    ]
    unsafe += live_carrier_problems(settings)
    if settings.delete_after < LIVE_DELETE_AFTER_FLOOR:
        unsafe.append(
            "delete_after is under an hour: the per-number limits count the last hour's"
            " verifications, which it would delete"
        )
    if demo:
        unsafe.append("--demo creates an account whose keys are printed on every start")
    return unsafe


def _placeholder(secret: str) -> bool:
    lowered = secret.strip().lower()
    return lowered in PLACEHOLDER_SECRETS or lowered.startswith("change-me")
