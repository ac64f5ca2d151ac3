"""The names opct registers with Inspect (tasks, scorer, metrics) so Inspect finds them as ``opct/<name>``.

Inspect prefixes the package name itself when it sees opct as an installed package; from inside a
source checkout (``pip install -e .`` leaves ``opct.egg-info`` there, which shadows the installed
metadata) it does not. A probe metric, registered once, shows which case this is (read through
Inspect's public :func:`inspect_ai.util.registry_info`), and :func:`registered` writes the prefix when
Inspect will not, so a log always names ``opct/opct_scorer`` and ``inspect score`` can find it again.
"""

from __future__ import annotations

from inspect_ai.scorer import Metric, SampleScore, metric
from inspect_ai.util import registry_info


@metric(name="registration_probe")
def _registration_probe() -> Metric:
    """Never computed: registered only to see whether Inspect prefixes opct's names itself."""

    def compute(scores: list[SampleScore]) -> float:
        return float(len(scores))

    return compute


#: Whether Inspect writes the ``opct/`` prefix itself.
INSPECT_PREFIXES = registry_info(_registration_probe).name.startswith("opct/")


def registered(name: str) -> str:
    """The name to register ``name`` under so that Inspect finds it as ``opct/<name>``."""
    return name if INSPECT_PREFIXES else f"opct/{name}"
