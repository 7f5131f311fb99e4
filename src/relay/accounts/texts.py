"""An account's own OTP texts: set, list and delete them, refused with a clear reason."""

from __future__ import annotations

from dataclasses import dataclass

from relay.accounts import store, template_store
from relay.accounts.key_cache import changing_keys
from relay.accounts.template_store import AccountTemplate
from relay.clock import Clock
from relay.db.driver import Db
from relay.db.limits import check_length
from relay.db.sql import Tx
from relay.errors import ParameterInvalid, ResourceMissing
from relay.sms.custom import (
    CUSTOM_CHANNELS,
    LONGEST_BRAND,
    LONGEST_CODE,
    TemplateInvalid,
    check_template,
    longest_segments,
    sms_segments,
)
from relay.sms.locales import MalformedLocale, normalize_locale


@dataclass(frozen=True)
class SavedText:
    template: AccountTemplate
    # SMS segments the text takes with a 6-digit code and the account's brand; None for email.
    segments: int | None

    @property
    def warning(self) -> str | None:
        """Said when the text is accepted but costs more than one SMS segment."""
        if self.segments is None or self.segments < 2:
            return None
        return (
            f"this text takes {self.segments} SMS segments with a 6-digit code and the"
            " account's brand; each segment is billed"
        )


class AccountTexts:
    def __init__(self, db: Db, clock: Clock, *, max_segments: int) -> None:
        self._db = db
        self._clock = clock
        # An SMS text that can take more segments than this is refused here, and an
        # SMS that would is never sent (`relay.delivery`): each segment is billed.
        self.max_segments = max_segments

    async def set(self, account_id: str, *, channel: str, locale: str, text: str) -> SavedText:
        """Create or replace the text for (channel, locale); ParameterInvalid says what is wrong."""
        try:
            check_template(channel, text)
        except TemplateInvalid as exc:
            param = "channel" if channel not in CUSTOM_CHANNELS else "text"
            raise ParameterInvalid(str(exc), param=param) from exc
        tag = _locale(locale)
        now = self._clock.now()

        async def work(tx: Tx) -> SavedText:
            words = await store.account_words(tx, account_id)
            if words is None:
                raise ResourceMissing(f"No account {account_id}.")
            brand, webotp_domain = words
            if channel == "sms":
                self._check_segments(text, brand, webotp_domain)
            saved = await template_store.put(
                tx, account_id, channel=channel, locale=tag, text=text, now=now
            )
            segments = sms_segments(text, brand=brand) if channel == "sms" else None
            return SavedText(saved, segments)

        # Whether the account has texts of its own is part of every kept key record.
        return await changing_keys(self._db, work)

    def _check_segments(self, text: str, brand: str, webotp_domain: str | None) -> None:
        most = longest_segments(text, brand=brand, webotp_domain=webotp_domain)
        if most > self.max_segments:
            line = " and the WebOTP line" if webotp_domain else ""
            raise ParameterInvalid(
                f"this text can take {most} SMS segments (with a {len(LONGEST_BRAND)}-character"
                f" brand, a {len(LONGEST_CODE)}-character code{line}); at most"
                f" {self.max_segments} are sent (max_segments)",
                param="text",
            )

    async def list(self, account_id: str) -> list[AccountTemplate]:
        async def work(tx: Tx) -> list[AccountTemplate]:
            await _brand(tx, account_id)
            return await template_store.list_templates(tx, account_id)

        return await self._db.read(work)

    async def delete(self, account_id: str, *, channel: str, locale: str) -> None:
        tag = _locale(locale)

        async def work(tx: Tx) -> bool:
            await _brand(tx, account_id)
            return await template_store.delete(tx, account_id, channel=channel, locale=tag)

        if not await changing_keys(self._db, work):
            raise ResourceMissing(f"No {channel} text for {tag} on {account_id}.", param="locale")


def _locale(locale: str) -> str:
    try:
        tag = normalize_locale(locale)
    except MalformedLocale as exc:
        raise ParameterInvalid(
            f"locale {locale!r} is not a BCP 47 language tag (en, pt-BR, zh-Hant).",
            param="locale",
        ) from exc
    return check_length(tag, "account_templates", "locale", param="locale", label="A locale")


async def _brand(tx: Tx, account_id: str) -> str:
    brand = await store.account_brand(tx, account_id)
    if brand is None:
        raise ResourceMissing(f"No account {account_id}.")
    return brand
