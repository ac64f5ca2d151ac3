"""Training methods: one config plus one trainer each, all driven by the one loop in :mod:`opct.training.loop`.

``METHODS`` maps a method name to its trainer class; each class names its settings section
(``config_class``) and the statistics it logs (``stats``). Built-in entries are registered lazily so
that validating a configuration (or writing a report) does not import every method. Other layers
register theirs (the GRPO attacker lives in :mod:`opct.attack`; see :mod:`opct.wiring`).

How a method is shown and compared is its :class:`MethodCard` (label, colour, order, its role in the
paper's comparison), given where it is registered, or as a ``card`` attribute of a class registered
directly; shared code (the report, experiments, the config's default) reads the cards, never a method's name.
"""

from __future__ import annotations

from opct.config.method_registry import METHODS, MethodCard, MethodRegistry

METHODS.register("opct", "opct.methods.opct:OPCTMethod", default=True,
                 card=MethodCard(label="OPCT", colour="#0072B2", order=2, paper_role="treatment"))
METHODS.register("bct", "opct.methods.bct:BCTMethod",
                 card=MethodCard(label="BCT", colour="#E69F00", order=1, paper_role="baseline"))
METHODS.register("act", "opct.methods.act:ACTMethod", card=MethodCard(label="ACT", colour="#009E73"))


def declared_compute(name: str) -> dict[str, str] | None:
    """What registered method ``name`` declares it spends (``Method.compute``), for a run manifest written
    before manifests recorded it; None for a name no method has, or a method that declares nothing."""
    declared = getattr(METHODS.get(name), "compute", None) if name in METHODS else None
    return dict(declared) if declared else None


__all__ = ["METHODS", "MethodCard", "MethodRegistry", "declared_compute"]
