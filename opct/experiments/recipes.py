"""A method's recipe as the plan and the report name it (its learning rate, steps, and its own knobs)."""

from __future__ import annotations

from typing import Any

from opct.config import RunConfig


def recipe_summary(run: RunConfig) -> dict[str, Any]:
    """The settings that make a method's recipe, as the report names them."""
    out: dict[str, Any] = {"lr": run.optim.lr, "steps": run.train.max_steps, "pairs_per_step": run.train.pairs_per_step}
    settings = run.method_config
    if getattr(settings, "sampling", None) is not None:
        out.update(n=settings.sampling.n, temperature=settings.sampling.temperature)
    if getattr(settings, "targets", None) is not None:  # BCT: its targets, and each axis's own settings
        t = settings.targets
        out["targets"] = {"n": t.n, "temperature": t.temperature,
                          "per_axis": {a: o.model_dump(exclude_none=True) for a, o in sorted(t.per_axis.items())}}
    if getattr(settings, "loss", None) is not None:
        out["loss"] = settings.loss.kind
        if hasattr(settings.loss, "kl_coef"):
            out["kl_coef"] = settings.loss.kl_coef
    return out


def selection_rule(evidence: dict[str, Any], method_settings: dict[str, Any]) -> str | None:
    """The rule of ``selection.json`` (``evidence``) whose picks ``method_settings`` are, or None."""
    return next((rule for rule, picks in evidence.get("method_settings", {}).items() if picks == method_settings), None)
