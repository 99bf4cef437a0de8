"""How many cases the fuzz tests try: the ``ci`` profile (the default, bounded for every run) or ``long``
(a local soak), chosen with ``FERRYMQ_FUZZ_PROFILE``.

Settings are applied per test rather than loaded globally, so no other test's hypothesis settings change.
Hypothesis's example database is off: every run starts fresh and writes nothing into the work tree; a failure
prints the ``@reproduce_failure`` blob needed to replay it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE_VARIABLE = "FERRYMQ_FUZZ_PROFILE"
# Examples per test, as a multiple of the test's own ci count.
_SCALE = {"ci": 1, "long": 40}


def profile_name() -> str:
    name = os.environ.get(PROFILE_VARIABLE, "ci")
    if name not in _SCALE:
        raise ValueError(f"{PROFILE_VARIABLE}={name!r}: expected one of {sorted(_SCALE)}")
    return name


for _name in _SCALE:
    settings.register_profile(
        f"ferrymq-fuzz-{_name}",
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def fuzz_settings(ci_examples: int) -> settings:
    """The settings for a fuzz test that tries ``ci_examples`` cases under the ci profile."""
    name = profile_name()
    return settings(settings.get_profile(f"ferrymq-fuzz-{name}"), max_examples=ci_examples * _SCALE[name])
