"""Training methods: one module each, all driven by the one loop in :mod:`opct.train`."""

from opct.methods.base import Method, Microbatch, TrainContext
from opct.methods.bct import BCTMethod
from opct.methods.opct import OPCTMethod

METHODS: dict[str, type[Method]] = {"opct": OPCTMethod, "bct": BCTMethod}

__all__ = ["METHODS", "BCTMethod", "Method", "Microbatch", "OPCTMethod", "TrainContext"]
