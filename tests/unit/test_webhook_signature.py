import hashlib
import hmac

import pytest

from relay.webhooks import WebhookVerificationError, verify
from relay.webhooks.signature import sign

SECRET = "whsec_test_current"
OLD_SECRET = "whsec_test_previous"
BODY = b'{"id":"evt_1","type":"verification.approved"}'
T = 1_700_000_000


def v1(payload: bytes, secret: str, timestamp: int) -> str:
    signed = f"{timestamp}.".encode() + payload
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def test_header_has_exactly_the_documented_shape() -> None:
    assert sign(BODY, [SECRET], timestamp=T) == f"t={T}, v1={v1(BODY, SECRET, T)}"


def test_one_v1_per_secret_in_the_given_order() -> None:
    header = sign(BODY, [SECRET, OLD_SECRET], timestamp=T)

    assert header == f"t={T}, v1={v1(BODY, SECRET, T)}, v1={v1(BODY, OLD_SECRET, T)}"


def test_signing_without_a_secret_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="secret"):
        sign(BODY, [], timestamp=T)


def test_a_signed_body_verifies() -> None:
    verify(BODY, sign(BODY, [SECRET], timestamp=T), SECRET, now=T)


def test_verify_is_exported_for_receivers() -> None:
    import relay.webhooks

    assert relay.webhooks.verify is verify
    assert issubclass(WebhookVerificationError, ValueError)


def test_a_tampered_body_is_rejected() -> None:
    header = sign(BODY, [SECRET], timestamp=T)

    with pytest.raises(WebhookVerificationError, match="no v1 signature matches"):
        verify(BODY.replace(b"approved", b"expired"), header, SECRET, now=T)


def test_a_wrong_secret_is_rejected() -> None:
    header = sign(BODY, [SECRET], timestamp=T)

    with pytest.raises(WebhookVerificationError, match="no v1 signature matches"):
        verify(BODY, header, "whsec_someone_else", now=T)


def test_the_secret_prefix_is_part_of_the_key() -> None:
    header = sign(BODY, [SECRET], timestamp=T)

    with pytest.raises(WebhookVerificationError):
        verify(BODY, header, SECRET.removeprefix("whsec_"), now=T)


def test_a_changed_timestamp_breaks_the_signature() -> None:
    header = sign(BODY, [SECRET], timestamp=T).replace(f"t={T}", f"t={T + 1}")

    with pytest.raises(WebhookVerificationError, match="no v1 signature matches"):
        verify(BODY, header, SECRET, now=T)


@pytest.mark.parametrize("secret", [SECRET, OLD_SECRET])
def test_during_a_secret_roll_either_secret_verifies(secret: str) -> None:
    header = sign(BODY, [SECRET, OLD_SECRET], timestamp=T)

    verify(BODY, header, secret, now=T)


@pytest.mark.parametrize(
    "template",
    [
        "t={t},v1={sig}",
        "t={t}, v1={sig}",
        "t={t},   v1={sig}",
        "v1={sig}, t={t}",
        "t={t}, v0=deadbeef, v1={sig}",
        "t={t}, v1=00ff, v1={sig}",
        "t={t}, v2=something-new, v1={sig}",
    ],
)
def test_spacing_order_unknown_schemes_and_extra_v1_are_tolerated(template: str) -> None:
    header = template.format(t=T, sig=v1(BODY, SECRET, T))

    verify(BODY, header, SECRET, now=T)


@pytest.mark.parametrize("age", [0, 299, 300, -300])
def test_timestamps_within_tolerance_are_accepted(age: int) -> None:
    verify(BODY, sign(BODY, [SECRET], timestamp=T), SECRET, now=T + age)


@pytest.mark.parametrize("age", [301, 3600, -301, -3600])
def test_old_and_future_timestamps_are_rejected(age: int) -> None:
    header = sign(BODY, [SECRET], timestamp=T)

    with pytest.raises(WebhookVerificationError, match="away from now"):
        verify(BODY, header, SECRET, now=T + age)


def test_tolerance_is_configurable() -> None:
    header = sign(BODY, [SECRET], timestamp=T)

    verify(BODY, header, SECRET, tolerance=3600, now=T + 3000)
    with pytest.raises(WebhookVerificationError):
        verify(BODY, header, SECRET, tolerance=10, now=T + 11)


def test_now_defaults_to_the_clock() -> None:
    import time

    now = int(time.time())
    verify(BODY, sign(BODY, [SECRET], timestamp=now), SECRET)
    with pytest.raises(WebhookVerificationError, match="away from now"):
        verify(BODY, sign(BODY, [SECRET], timestamp=now - 3600), SECRET)


@pytest.mark.parametrize(
    "header",
    [
        "",
        " ",
        "garbage",
        "t=1700000000",
        "v1=abc",
        "t=, v1=abc",
        "t=1700000000, v1=",
        "t=1700000000,, v1=abc",
        "t=abc, v1=abc",
        "t=-5, v1=abc",
        "t=+1700000000, v1=abc",
        "t=1_700_000_000, v1=abc",
        "t=\u0661\u0662, v1=abc",
        "t=1700000000, t=1700000000, v1=abc",
        "=1700000000, v1=abc",
    ],
)
def test_malformed_headers_are_rejected_with_a_clear_error(header: str) -> None:
    with pytest.raises(WebhookVerificationError, match="signature"):
        verify(BODY, header, SECRET, now=T)


def test_a_non_ascii_v1_is_a_mismatch_not_a_crash() -> None:
    with pytest.raises(WebhookVerificationError, match="no v1 signature matches"):
        verify(BODY, f"t={T}, v1=\u00e9t\u00e9", SECRET, now=T)
