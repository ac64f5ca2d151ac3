"""Training methods: one module each, all driven by the one loop in :mod:`opct.train`."""

from opct.methods.base import Method, Microbatch, TrainContext
from opct.methods.bct import BCTMethod
from opct.methods.grpo_attack import GRPOAttackMethod
from opct.methods.opct import OPCTMethod

METHODS: dict[str, type[Method]] = {"opct": OPCTMethod, "bct": BCTMethod, "grpo_attack": GRPOAttackMethod}

__all__ = ["METHODS", "BCTMethod", "GRPOAttackMethod", "Method", "Microbatch", "OPCTMethod", "TrainContext"]
