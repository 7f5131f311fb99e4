"""Checks on request fields that JSON Schema cannot express, shared by the send routes."""

from __future__ import annotations

from relay.config import IpNetwork
from relay.errors import ParameterInvalid
from relay.sms.locales import MalformedLocale, normalize_locale
from relay.webhooks.guard import url_problem

_URL_PROBLEMS = {
    "malformed": "webhook_url is not a well-formed URL.",
    "not_https": "webhook_url must use https://.",
    "too_long": "webhook_url may be at most 2048 characters.",
    "userinfo": "webhook_url may not carry a user name or password.",
    "no_host": "webhook_url needs a host name.",
    "invalid_host": (
        "webhook_url's host must be an IP literal or a valid DNS name: labels of letters, "
        "digits and inner hyphens, at most 63 characters each and 253 in all."
    ),
    "refused_address": "webhook_url points at a private or reserved address.",
}


def require_webhook_url(url: str | None, *, allowed: list[IpNetwork]) -> None:
    if url is None:
        return
    problem = url_problem(url, allowed=allowed)
    if problem is not None:
        raise ParameterInvalid(_URL_PROBLEMS[problem], param="webhook_url")


def require_locale(tag: str | None) -> str | None:
    """The tag in canonical case, or None: the service picks the language from the country."""
    if tag is None:
        return None
    try:
        return normalize_locale(tag)
    except MalformedLocale as exc:
        raise ParameterInvalid(
            f"locale {tag!r} is not a BCP 47 language tag (en, pt-BR, zh-Hant).", param="locale"
        ) from exc
