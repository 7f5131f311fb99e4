"""One typed Settings object: defaults < TOML file < RELAY_* environment < command line."""

from __future__ import annotations

import ipaddress
import secrets
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from relay.durations import parse_duration
from relay.private_files import private_dir, write_private

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# The shortest `delete_after` live mode accepts: the per-number limits count a number's
# verifications of the last hour from the rows themselves (relay.abuse.store).
LIVE_DELETE_AFTER_FLOOR = 3600
# Seconds, given as a number or a text with a unit ("90s", "12h", "30d"; relay.durations).
Duration = Annotated[int, BeforeValidator(parse_duration)]


def _split_commas(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RELAY_", extra="ignore")

    # `live` sends real SMS to real people: settings that are only safe on a
    # developer's machine then refuse to start (relay.cli.checks).
    mode: Literal["development", "live"] = "development"
    data_dir: Path = Path(".relay")
    database_url: str | None = None
    config: Path | None = None

    host: str = "127.0.0.1"
    port: int = Field(8443, ge=0, le=65535)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # Plain HTTP is accepted only from these proxies, and only with X-Forwarded-Proto: https;
    # their X-Forwarded-For names the client for keys restricted to networks (relay.web.peers).
    trusted_proxies: Annotated[list[IpNetwork], NoDecode] = []
    public_url: str | None = None
    # API processes of `relay serve` on one port (PostgreSQL only above 1).
    workers: int = Field(1, ge=1, le=64)
    # SIGTERM waits this long for requests in flight, then as long again for
    # claimed SMS submits and webhook attempts, before it cancels and releases them.
    shutdown_timeout: float = Field(10.0, gt=0, le=600)
    # The front door (docs/operations.md): a request head must arrive within
    # `header_timeout` seconds, or the connection closes; a head over
    # `max_request_head` bytes is refused with 431 before it is read further.
    header_timeout: float = Field(30.0, ge=1, le=60)
    max_request_head: int = Field(65_536, ge=16_384, le=1_048_576)

    code_key: str | None = None
    default_ttl: int = Field(600, ge=60, le=3600)
    max_sends: int = Field(5, ge=1, le=20)
    resend_interval: int = Field(30, ge=0, le=3600)
    sweep_interval: float = Field(1.0, gt=0, le=60)
    brand: str = "Relay"

    webhook_timeout: float = Field(5.0, gt=0, le=60)
    webhook_retry_schedule: Annotated[list[float], NoDecode] = [10.0, 60.0, 300.0]
    webhook_allowed_networks: Annotated[list[IpNetwork], NoDecode] = []
    webhook_ca_bundle: Path | None = None
    # How long a worker holds a delivery; must outlast webhook_timeout. Unset:
    # webhook_timeout + 10 s. A killed worker's delivery is retried after it.
    webhook_lease: float | None = Field(None, gt=0, le=3600)
    # How often an idle delivery loop looks for work it was not woken for: events
    # another process wrote, expired leases. Its own commits wake it at once.
    webhook_poll_interval: float = Field(0.5, gt=0, le=60)
    # Attempts in flight per process, in total and per endpoint (scheme, host,
    # port): a receiver that hangs holds its own share of slots, no more.
    webhook_concurrency: int = Field(64, ge=1, le=4096)
    webhook_endpoint_concurrency: int = Field(16, ge=1, le=4096)
    # False when separate `relay worker` processes do the background work.
    serve_background: bool = True

    # Abuse limits (docs/limits.md). Per-number caps are multiplied for test keys.
    rate_limit: float = Field(100.0, gt=0)
    rate_limit_burst: int = Field(200, ge=1)
    rate_limit_storage: str = "memory://"
    # Failed API authentications (401s) per client address on /v1/. Once spent, only
    # requests whose key does not authenticate get 429; a valid key is still served.
    # The same moving window as `rate_limit`.
    auth_failure_rate: float = Field(5.0, gt=0)
    auth_failure_burst: int = Field(300, ge=1)
    # Carrier callbacks whose signature fails, per carrier and process, before they are
    # answered 429 instead of 401 (decision 0043); a valid signature is never refused.
    callback_failure_rate: float = Field(5.0, gt=0)
    callback_failure_burst: int = Field(300, ge=1)
    idempotency_lease: float = Field(60.0, gt=0, le=3600)
    number_verifications_per_hour: int = Field(10, ge=1)
    number_failed_checks_per_day: int = Field(20, ge=1)
    test_mode_number_limit_factor: int = Field(10, ge=1)
    daily_sms_cap: int = Field(10_000, ge=1)
    pumping_guard: Literal["enforce", "shadow", "off"] = "enforce"
    pumping_min_sends: int = Field(30, ge=1)
    pumping_country_min_sends: int = Field(300, ge=1)
    pumping_min_conversion: float = Field(0.10, ge=0, le=1)
    pumping_block_seconds: int = Field(3600, ge=1)

    # Delivery layer (docs/delivery.md). `carriers` is the `[carriers.NAME]`
    # tables of the config file; `routes` maps a country or `default` to
    # carrier names, tried in order, or to a table with `carriers` and
    # `strategy = "measured"` (relay.carriers.measured). `channel_routes` maps
    # `whatsapp` and `email` to carrier names of that channel, tried in order.
    carriers: dict[str, dict[str, Any]] = {}
    routes: dict[str, list[str] | dict[str, Any]] = {}
    channel_routes: dict[str, Any] = {}
    # Seconds to wait for a delivery receipt before failing over (per carrier:
    # `receipt_timeout` in its table).
    receipt_timeout: float = Field(60.0, gt=0, le=86400)
    # How long a process holds an attempt it is submitting; must outlast a submit.
    dispatch_lease: float = Field(30.0, gt=0, le=3600)
    # The Send API's failover window: after it, no new attempt is made for a message.
    message_ttl: int = Field(600, ge=60, le=86400)
    # The Send API's sender id: messages go out from one shared sender.
    shared_sender: str = Field("Relay", min_length=1, max_length=11)
    # SMS segments a code's text may take: an own text that can take more is refused
    # when set, and an SMS that would take more (a brand or WebOTP domain changed
    # since) fails its attempt with `sms_too_long` instead of being sent.
    max_segments: int = Field(3, ge=1, le=10)
    # Delay before the sandbox delivers to +15005550003.
    sandbox_slow_delivery: float = Field(5.0, ge=0, le=3600)

    log_level: str = "info"
    # `json`: one JSON object per line (docs/logging.md). Unset: text.
    log_format: Literal["text", "json"] = "text"

    # GET /metrics without a credential: loopback and these networks, direct connections
    # only. With `metrics_token` set, that bearer token reads it from anywhere.
    metrics_networks: Annotated[list[IpNetwork], NoDecode] = []
    metrics_token: str | None = None

    # The operator console at /console (docs/console.md). `admin_token` signs in to
    # every account; unset, only an account's own API key signs in.
    admin_token: str | None = Field(None, min_length=16)
    # Seconds a console session lasts from sign-in.
    console_session_seconds: int = Field(1800, ge=60, le=86400)
    # Failed sign-ins per client address: the same moving window as the API's limit.
    console_signin_rate: float = Field(0.2, gt=0)
    console_signin_burst: int = Field(5, ge=1)
    # Failed sign-ins with a key of one mode (sk_test_, sk_live_), from every address
    # together. Once spent, a key of that mode the process does not know to be valid is
    # refused without a database read; a valid key still signs in.
    console_signin_prefix_rate: float = Field(1.0, gt=0)
    console_signin_prefix_burst: int = Field(60, ge=1)
    # Failed admin-token sign-ins from every address together. Once spent, every
    # admin-token attempt waits a second before it is compared; the right one signs in.
    console_admin_failure_rate: float = Field(0.1, gt=0)
    console_admin_failure_burst: int = Field(30, ge=1)
    # Strict-Transport-Security max-age on every HTTPS answer; 0 sends none.
    hsts_seconds: int = Field(31_536_000, ge=0)

    # Retention (docs/privacy.md): verifications and messages, with their attempts,
    # events and webhook deliveries, are deleted this long after their creation (an
    # account may set its own); their figures are kept as aggregates without a
    # destination. The sweeper looks for them every `retention_interval`.
    delete_after: Duration = 90 * 86_400
    retention_interval: Duration = 60

    @field_validator(
        "trusted_proxies",
        "webhook_retry_schedule",
        "webhook_allowed_networks",
        "metrics_networks",
        mode="before",
    )
    @classmethod
    def _comma_lists(cls, value: object) -> object:
        return _split_commas(value)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings)

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'relay.sqlite3').resolve()}"

    def code_secret(self) -> bytes:
        """The configured code key, or one generated once into the data dir."""
        if self.code_key:
            return self.code_key.encode()
        path = self.data_dir / "code.key"
        if not path.exists():
            private_dir(path.parent)
            write_private(path, secrets.token_urlsafe(48).encode())
        return path.read_text().strip().encode()


def load_settings(**overrides: Any) -> Settings:
    """Build settings; `overrides` (command-line values) beat env, env beats the TOML file."""
    explicit = Settings(**given_values(overrides))
    if explicit.config is None:
        return explicit
    return Settings(**{**read_file(explicit.config), **explicit.model_dump(exclude_unset=True)})


def given_values(overrides: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in overrides.items() if v is not None}


def read_file(path: Path) -> dict[str, Any]:
    """The TOML file's values (OSError, tomllib.TOMLDecodeError when it cannot be read)."""
    with path.open("rb") as handle:
        return tomllib.load(handle)


def unknown_keys(values: dict[str, Any]) -> list[str]:
    """Keys of a config file that name no setting: a typo would otherwise go unnoticed."""
    return sorted(set(values) - set(Settings.model_fields))
