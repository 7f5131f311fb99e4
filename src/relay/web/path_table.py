"""Which route of the API a method and path name, found by dict look-ups.

The router tries every route's pattern in turn; this finds the same route with
one look-up for a literal path, and for a template (`/v1/verifications/{id}`)
one look-up by the segments before its first parameter, then one comparison.
It answers only where the router would pick the same route: it is built only
from routes no other route of the same method can match, and it knows nothing
of HEAD, of mounted apps (`root_path`) or of typed parameters (`{n:int}`), which
it leaves to the router.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from starlette.routing import BaseRoute, Route

from relay.web.dispatch import PathEndpoint


@dataclass(frozen=True, slots=True)
class _Template:
    parts: tuple[str | None, ...]  # None where a parameter goes
    names: tuple[str, ...]
    endpoint: PathEndpoint


def _parts(path: str) -> tuple[tuple[str | None, ...], tuple[str, ...]]:
    parts: list[str | None] = []
    names: list[str] = []
    for part in path.split("/"):
        if part.startswith("{") and part.endswith("}"):
            parts.append(None)
            names.append(part[1:-1])
        else:
            parts.append(part)
    return tuple(parts), tuple(names)


def _overlap(one: tuple[str | None, ...], other: tuple[str | None, ...]) -> bool:
    """Whether some path matches both shapes."""
    return len(one) == len(other) and all(
        a is None or b is None or a == b for a, b in zip(one, other, strict=True)
    )


class PathTable:
    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        self._static: dict[tuple[str, str], PathEndpoint] = {}
        # By method, number of segments and the literal segments before the first
        # parameter; and by method and number of segments, how many those are.
        self._templates: dict[tuple[str, int, tuple[str, ...]], _Template] = {}
        self._prefixes: dict[tuple[str, int], tuple[int, ...]] = {}
        shapes: list[tuple[str, tuple[str | None, ...]]] = []
        for route in routes:
            if not isinstance(route, Route) or not isinstance(route.endpoint, PathEndpoint):
                raise ValueError(f"not a route of the table: {route!r}")
            if ":" in route.path:
                raise ValueError(f"typed parameters are left to the router: {route.path}")
            parts, names = _parts(route.path)
            for method in route.endpoint.by_method:
                if method == "HEAD":
                    continue
                if any(m == method and _overlap(parts, shape) for m, shape in shapes):
                    raise ValueError(f"{method} {route.path} overlaps another route")
                shapes.append((method, parts))
                self._add(method, route.path, parts, names, route.endpoint)

    def _add(
        self,
        method: str,
        path: str,
        parts: tuple[str | None, ...],
        names: tuple[str, ...],
        endpoint: PathEndpoint,
    ) -> None:
        if not names:
            self._static[(method, path)] = endpoint
            return
        prefix = parts.index(None)
        literal = tuple(part for part in parts[:prefix] if part is not None)
        self._templates[(method, len(parts), literal)] = _Template(parts, names, endpoint)
        known = self._prefixes.get((method, len(parts)), ())
        if prefix not in known:
            self._prefixes[(method, len(parts))] = (*known, prefix)

    def find(self, method: str, path: str) -> tuple[PathEndpoint, dict[str, str]] | None:
        """The route's endpoint and the path's parameters, or None: ask the router."""
        endpoint = self._static.get((method, path))
        if endpoint is not None:
            return endpoint, {}
        segments = path.split("/")
        for prefix in self._prefixes.get((method, len(segments)), ()):
            template = self._templates.get((method, len(segments), tuple(segments[:prefix])))
            if template is not None:
                return _matched(template, segments)
        return None


def _matched(
    template: _Template, segments: list[str]
) -> tuple[PathEndpoint, dict[str, str]] | None:
    values = []
    for part, segment in zip(template.parts, segments, strict=True):
        if part is None:
            if not segment:
                return None
            values.append(segment)
        elif part != segment:
            return None
    return template.endpoint, dict(zip(template.names, values, strict=True))
