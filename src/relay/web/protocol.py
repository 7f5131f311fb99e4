"""uvicorn's HTTP/1.1 protocol, answering what its parser refuses in the contract's shape.

A malformed, negative or repeated Content-Length, or bytes left over past a body's
declared length, never reach the application: the parser rejects the request, and
uvicorn answers a plain-text 400 itself. This subclass answers the same 400 with the
JSON error body instead; the connection still closes, since its framing is lost.
"""

from __future__ import annotations

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from relay import errors as e
from relay.config import Settings
from relay.web.callers import base_url
from relay.web.errors import error_body

_REFUSAL = e.InvalidRequest(
    "The request is not well-formed HTTP/1.1: check Content-Length and Transfer-Encoding."
)


class RelayHttpProtocol(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        scope = {
            "headers": list(getattr(self, "headers", None) or []),
            "client": getattr(self, "client", None),
            "server": getattr(self, "server", None),
        }
        body = orjson.dumps(error_body(_REFUSAL, base_url=base_url(scope, self._settings())))
        content = [b"HTTP/1.1 400 Bad Request\r\n"]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: application/json\r\n",
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                b"connection: close\r\n\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(content))
        self.transport.close()

    def _settings(self) -> Settings:
        """Relay's settings, from the application this connection serves."""
        services = getattr(getattr(self.app, "state", None), "services", None)
        settings = getattr(services, "settings", None)
        return settings if isinstance(settings, Settings) else Settings()
