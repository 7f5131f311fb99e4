"""How long the model-based test runs: short in CI, long on request.

`RELAY_MODEL_PROFILE=long` for a local run of many more and longer sequences.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

SHARED = {
    "deadline": None,  # one step is several requests, and the machine is shared
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "database": None,  # no example database written into the tree
}
PROFILES = {
    "ci": settings(max_examples=25, stateful_step_count=30, derandomize=True, **SHARED),
    "long": settings(max_examples=400, stateful_step_count=80, **SHARED),
}


def chosen() -> settings:
    name = os.environ.get("RELAY_MODEL_PROFILE", "ci")
    if name not in PROFILES:
        raise ValueError(f"RELAY_MODEL_PROFILE must be one of {sorted(PROFILES)}, not {name!r}")
    return PROFILES[name]
