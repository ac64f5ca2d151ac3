"""Training methods: one config plus one trainer each, all driven by the one loop in :mod:`opct.training.loop`.

``METHODS`` maps a method name to its trainer class; each class names its settings section
(``config_class``) and the statistics it logs (``stats``). Built-in entries are registered lazily so
that validating a configuration does not import every method. Other layers register theirs (the
GRPO attacker lives in :mod:`opct.attack`; see :mod:`opct.builtins`).
"""

from opct.registry import Registry

METHODS: Registry = Registry("training method")
METHODS.register("opct", "opct.methods.opct:OPCTMethod")
METHODS.register("bct", "opct.methods.bct:BCTMethod")
METHODS.register("act", "opct.methods.act:ACTMethod")

__all__ = ["METHODS"]
