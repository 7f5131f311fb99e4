"""The error tree. Each error has a stable code; only `relay.web.errors` knows HTTP."""

from __future__ import annotations


class RelayError(Exception):
    code: str = "internal_error"
    default_message: str = "An internal error occurred."

    def __init__(self, message: str | None = None, *, param: str | None = None) -> None:
        self.message = message or self.default_message
        self.param = param
        super().__init__(self.message)


class InvalidRequest(RelayError):
    code = "parameter_invalid"
    default_message = "The request is invalid."


class ParameterMissing(InvalidRequest):
    code = "parameter_missing"


class ParameterInvalid(InvalidRequest):
    code = "parameter_invalid"


class ParameterUnknown(InvalidRequest):
    code = "parameter_unknown"


class InvalidJson(InvalidRequest):
    code = "invalid_json"
    default_message = "The request body is not valid JSON."


class ContentTypeInvalid(InvalidRequest):
    code = "content_type_invalid"
    default_message = "Request bodies must be sent as Content-Type: application/json."


class PhoneNumberInvalid(InvalidRequest):
    code = "phone_number_invalid"
    default_message = "The phone number is not a valid E.164 number."


class PhoneNumberUnsupported(InvalidRequest):
    code = "phone_number_unsupported"
    default_message = "SMS codes cannot be sent to this kind of number."


class CountryNotAllowed(InvalidRequest):
    code = "country_not_allowed"
    default_message = "This account may not send to the number's country."


class BodyTooLarge(InvalidRequest):
    code = "body_too_large"
    default_message = "The request body exceeds 64 KiB."


class HttpsRequired(InvalidRequest):
    code = "https_required"
    default_message = "Relay accepts requests over HTTPS only."


class AuthenticationFailed(RelayError):
    code = "authentication_failed"
    default_message = "No valid API key provided."


class ResourceMissing(RelayError):
    code = "resource_missing"
    default_message = "No such object."


class RouteNotFound(RelayError):
    code = "route_not_found"
    default_message = "No such route."


class MethodNotAllowed(RelayError):
    code = "method_not_allowed"
    default_message = "This route does not accept that HTTP method."


class VerificationClosed(RelayError):
    """A verification that is no longer pending; subclasses say how it ended."""


class VerificationApproved(VerificationClosed):
    code = "verification_approved"
    default_message = "This verification is already approved."


class VerificationExpired(VerificationClosed):
    code = "verification_expired"
    default_message = "This verification has expired."


class VerificationCanceled(VerificationClosed):
    code = "verification_canceled"
    default_message = "This verification was canceled."


class MaxAttemptsReached(VerificationClosed):
    code = "max_attempts_reached"
    default_message = "This verification used all of its checks."


class IdempotencyKeyInUse(RelayError):
    code = "idempotency_key_in_use"
    default_message = "A request with this Idempotency-Key is still being processed."


class IdempotencyKeyReused(RelayError):
    code = "idempotency_key_reused"
    default_message = "This Idempotency-Key was used with a different request."


class RateLimitError(RelayError):
    code = "rate_limited"
    default_message = "Too many requests."

    def __init__(
        self, message: str | None = None, *, retry_after: int, param: str | None = None
    ) -> None:
        super().__init__(message, param=param)
        self.retry_after = max(1, retry_after)


class RateLimited(RateLimitError):
    code = "rate_limited"


class MaxSendsReached(RateLimitError):
    code = "max_sends_reached"
    default_message = "This verification has been sent the maximum number of times."


class ResendTooSoon(RateLimitError):
    code = "resend_too_soon"
    default_message = "A code was sent to this number moments ago; wait before resending."


class NoRouteAvailable(RelayError):
    code = "no_route_available"
    default_message = "No SMS route is configured for this destination."


class NotReady(RelayError):
    code = "not_ready"
    default_message = "Relay is not ready to serve: a readiness check failed."


class DatabaseUnreachable(RelayError):
    code = "database_unavailable"
    default_message = "The database is unavailable: retry shortly, with the same Idempotency-Key."


class DatabaseBusy(DatabaseUnreachable):
    code = "database_busy"
    default_message = (
        "The database made this request give way to concurrent ones more often than Relay"
        " retries it; nothing was written: retry shortly, with the same Idempotency-Key."
    )


class InternalError(RelayError):
    code = "internal_error"


class TooManyVerifications(RateLimitError):
    code = "too_many_verifications"
    default_message = "Too many verifications were started for this number; try again later."


class TooManyFailedChecks(RateLimitError):
    code = "too_many_failed_checks"
    default_message = "Too many wrong codes were submitted for this number; try again later."


class DestinationBlocked(RateLimitError):
    code = "destination_blocked"
    default_message = (
        "Sends to this destination are paused: many codes were sent there and almost none used."
    )


class DailyCapReached(RateLimitError):
    code = "daily_cap_reached"
    default_message = "This account reached its daily SMS cap; try again later."
