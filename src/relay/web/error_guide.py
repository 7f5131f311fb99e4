"""For each error code: what causes it and what the caller does about it (`/docs/errors`).

A test walks the error catalogue: a new code without an entry here fails it.
"""

from __future__ import annotations

from collections.abc import Mapping

# code → (cause, fix)
GUIDE: Mapping[str, tuple[str, str]] = {
    "parameter_missing": (
        "A required field of the body or query is absent; `param` names it.",
        "Send the field; the API reference lists each endpoint's required fields.",
    ),
    "parameter_invalid": (
        "A field has the wrong type or is out of range; `param` names it.",
        "Correct the value; the message gives the rule it broke.",
    ),
    "parameter_unknown": (
        "The body or query has a field Relay does not know (often a typo).",
        "Remove or rename the field named by `param`.",
    ),
    "invalid_json": (
        "The body is not valid JSON.",
        "Send one JSON object, UTF-8 encoded.",
    ),
    "content_type_invalid": (
        "A POST body was sent without `Content-Type: application/json`.",
        "Set the header; form and multipart bodies are refused.",
    ),
    "phone_number_invalid": (
        "`to` is not a valid E.164 number.",
        "Send `+`, the country code and the number, digits only: `+14155552671`.",
    ),
    "phone_number_unsupported": (
        "The number cannot receive SMS codes (fixed line, premium rate, pager...).",
        "Ask the user for a mobile number.",
    ),
    "country_not_allowed": (
        "The account may not send to this number's country.",
        "Widen the list with `relay accounts update ID --allow-countries ...`.",
    ),
    "key_limit_reached": (
        "The account already has two active keys of this mode.",
        "Revoke one with `relay keys revoke KEY_ID`, then create the new one.",
    ),
    "body_too_large": (
        "The body is larger than 64 KiB.",
        "Send a smaller body; no endpoint needs more.",
    ),
    "https_required": (
        "The request came over plain HTTP, not from a trusted proxy.",
        "Call `https://`; behind a proxy, list it in `trusted_proxies`.",
    ),
    "authentication_failed": (
        "The API key is missing, malformed, unknown or revoked (one answer for all four).",
        "Send `Authorization: Bearer sk_test_...` or `sk_live_...` with an active key.",
    ),
    "resource_missing": (
        "No object with this id exists for this account and mode.",
        "Check the id, and that the key's mode (test or live) is the one that created it.",
    ),
    "route_not_found": (
        "No endpoint has this path.",
        "Check the path against the API reference (`/docs`).",
    ),
    "method_not_allowed": (
        "The path exists but not with this HTTP method.",
        "Use a method from the `Allow` header.",
    ),
    "verification_approved": (
        "The verification was already approved; it takes no more checks or sends.",
        "Treat the user as verified; start a new verification to verify again.",
    ),
    "verification_expired": (
        "The code's lifetime (`ttl`) is over.",
        "Start a new verification.",
    ),
    "verification_canceled": (
        "The verification was canceled.",
        "Start a new verification.",
    ),
    "max_attempts_reached": (
        "Five wrong codes closed this verification.",
        "Start a new verification; the per-number limits still apply.",
    ),
    "idempotency_key_in_use": (
        "A request with this `Idempotency-Key` is still running.",
        "Retry after it ends; the retry gets its stored answer.",
    ),
    "idempotency_key_reused": (
        "This `Idempotency-Key` was used with a different method, path or body.",
        "Use a new key for a new request.",
    ),
    "rate_limited": (
        "The key sent more requests per second than its rate allows, or requests from"
        " this address failed to authenticate too often.",
        "Wait for `Retry-After` seconds; spread requests out; fix the key being sent.",
    ),
    "max_sends_reached": (
        "This verification was sent the maximum number of times (`max_sends`).",
        "Start a new verification later.",
    ),
    "resend_too_soon": (
        "A code went to this number less than `resend_interval` seconds ago.",
        "Wait for `Retry-After` seconds before resending.",
    ),
    "too_many_verifications": (
        "Too many verifications were started for this number in the last hour.",
        "Wait for `Retry-After`; if it is your own testing, use a test key.",
    ),
    "too_many_failed_checks": (
        "Too many wrong codes were submitted for this number in 24 hours.",
        "Wait for `Retry-After`; this protects users against code guessing.",
    ),
    "destination_blocked": (
        "The pumping guard paused this prefix or country: many codes, almost none used.",
        "Wait for `Retry-After`; operators tune `pumping_*` settings (docs/limits.md).",
    ),
    "daily_cap_reached": (
        "The account sent its daily SMS cap (`daily_sms_cap`) in the last 24 hours,"
        " counted in clock hours (this hour and the 23 before it).",
        "Wait for `Retry-After` (the cap lifts on the hour), or ask the operator to raise it.",
    ),
    "no_route_available": (
        "A live key sent to a country no configured route covers.",
        "The operator adds a route (or `default`) for it in the config file.",
    ),
    "not_ready": (
        "`/readyz` only: a readiness check failed; the message names it.",
        "Database: start it or fix the URL. Migrations: run `relay migrate`."
        " Carriers: check the SMSC.",
    ),
    "database_unavailable": (
        "The database did not answer or refused the connection (stopped, restarting,"
        " unreachable, disk full or read-only).",
        "Retry after `Retry-After` with the same `Idempotency-Key`; operators check"
        " `/readyz` and the database.",
    ),
    "database_busy": (
        "A deadlock with concurrent writes (PostgreSQL) chose this request's transaction"
        " as its victim each time Relay ran it again; it was rolled back, nothing changed.",
        "Retry after `Retry-After` with the same `Idempotency-Key`.",
    ),
    "internal_error": (
        "A fault in Relay itself; nothing about the request is known to be wrong.",
        "Retry with the same `Idempotency-Key`; report the `request_id` if it persists.",
    ),
}
