"""A method's recipe as the plan and the report name it (its learning rate, steps, and its own knobs)."""

from __future__ import annotations

from typing import Any

from opct.config import RunConfig

#: The selection rules that pick a recipe (the lab's selection, `opct-lab select`; ``eligible`` is the guard every pick passes).
PICK_RULES = ("teacher_kl", "good_behaviour", "family_transfer")


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
    """The rule of ``selection.json`` (``evidence``) whose picks ``method_settings`` holds, method by method for
    every method that rule picked (a method the selection did not cover keeps its own, from the experiment
    file), or None."""
    return next((rule for rule, picks in evidence.get("method_settings", {}).items()
                 if picks and all(method_settings.get(m) == p for m, p in picks.items())), None)


def rule_variants(evidence: dict[str, Any], shipped: str = "teacher_kl") -> dict[str, dict[str, Any]]:
    """The experiment-file ``variants:`` that train every other rule's pick where it differs from the
    ``shipped`` rule's (and from an earlier rule's): ``<method>-<rule>`` -> ``{method, settings}`` (dotted
    recipe keys and the pick's steps), so one experiment evaluates every distinct pick side by side."""
    out: dict[str, dict[str, Any]] = {}
    for method, picks in sorted(evidence.get("chosen", {}).items()):
        seen = [(picks[shipped]["recipe"], picks[shipped]["step"])] if picks.get(shipped) else []
        for rule in PICK_RULES:
            choice = picks.get(rule)
            if rule == shipped or not choice or (choice["recipe"], choice["step"]) in seen:
                continue
            seen.append((choice["recipe"], choice["step"]))
            out[f"{method}-{rule}"] = {"method": method, "settings": {**choice["recipe"], "train.max_steps": choice["step"]}}
    return out
