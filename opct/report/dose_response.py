"""The study's dose of one model: how far BCT's targets lie from the model's own samples (docs/mechanism.md).

Pure functions over an off-policy profile (:mod:`opct.diagnostics.offpolicy`); nothing here trains, loads or
samples. :func:`primary_dose`: of a level, the mean over families of the mean over the three axes (sycophancy,
jailbreak, awareness) of ``own_seq_logprob − target_seq_logprob`` from each family's profile, in nats.
:func:`dose_summary` prints it for one model (``opct pairs profile``). The dose-response trend test over a
study's levels is the lab's (``opct_lab.report.trend``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The axes whose profile the primary dose averages (docs/mechanism.md, "The measured dose").
DOSE_AXES = ("sycophancy", "jailbreak", "awareness")
#: The z of a 95% normal interval, as the dose's interval and a level's weight write it.
Z_95 = 1.96


@dataclass(frozen=True)
class Dose:
    """A level's primary dose (nats) with a 95% interval, and each family's value it averages."""

    value: float
    ci_low: float
    ci_high: float
    per_family: dict[str, float] = field(default_factory=dict)


def _sd(est: Mapping[str, Any]) -> float:
    """The standard deviation a 95% interval record ``{ci_low, ci_high}`` implies (normal approximation)."""
    return (float(est["ci_high"]) - float(est["ci_low"])) / (2 * Z_95)


def _own_and_target(axis_record: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """One profiled axis's ``own_seq_logprob`` and ``target_seq_logprob`` records, or None when either is
    missing or has no finite value (no complete target, or no own sample)."""
    measures = axis_record.get("measures", {})
    own, target = measures.get("own_seq_logprob"), measures.get("target_seq_logprob")
    if not own or not target or any(m.get("value") is None or math.isnan(float(m["value"])) for m in (own, target)):
        return None
    return own, target


def primary_dose(profiles: Mapping[str, Mapping[str, Any]]) -> Dose:
    """The primary dose from ``{family: its off-policy profile}`` (:func:`opct.diagnostics.offpolicy.summarize`'s data).

    Value: the mean over families of the mean over :data:`DOSE_AXES` of the profile's
    ``own_seq_logprob`` minus its ``target_seq_logprob`` (both means). Interval (reported, never
    propagated into the trend): ``value ± 1.96·se``, where ``se`` combines each mean's own interval as
    independent normal errors. A profile without one of the axes, or without either measure, is an error:
    it is not the pre-registered dose.
    """
    if not profiles:
        raise ValueError("no profile: a level's dose needs its base organism's profile for at least one family")
    per_family, variances = {}, []
    for family, profile in profiles.items():
        axes = profile.get("axes", {})
        terms = []
        for axis in DOSE_AXES:
            pair = _own_and_target(axes.get(axis, {}))
            if pair is None:
                raise ValueError(f"{family}'s profile has no own and target sequence log-probs on {axis}")
            own, target = pair
            terms.append(float(own["value"]) - float(target["value"]))
            variances.append(_sd(own) ** 2 + _sd(target) ** 2)
        per_family[family] = sum(terms) / len(terms)
    value = sum(per_family.values()) / len(per_family)
    se = math.sqrt(sum(variances)) / (len(DOSE_AXES) * len(per_family))
    return Dose(value, value - Z_95 * se, value + Z_95 * se, per_family)


def dose_summary(profile: Mapping[str, Any]) -> str:
    """One model's profile as the study's dose, for ``opct pairs profile``: each profiled axis's ``own − target``
    sequence log-prob (nats; the higher, the less likely BCT's target is than the model's own samples), then
    their mean over :data:`DOSE_AXES` with its interval (:func:`primary_dose` over this one model) where the
    profile has all three, else which of them it lacks."""
    axes = profile.get("axes", {})
    pairs = {axis: _own_and_target(record) for axis, record in sorted(axes.items())}
    gaps = [f"{axis} not measured (no complete target or no own sample)" if pair is None
            else f"{axis} {float(pair[0]['value']) - float(pair[1]['value']):+.3f}" for axis, pair in pairs.items()]
    line = "own − target sequence log-prob, nats: " + (", ".join(gaps) or "no axis profiled")
    if any(pairs.get(axis) is None for axis in DOSE_AXES):
        missing = [a for a in DOSE_AXES if a not in axes]
        return line + ("; the study's dose needs " + ", ".join(DOSE_AXES) + (f" (missing: {', '.join(missing)})" if missing
                       else " each with both log-probs") + " (docs/mechanism.md, \"The measured dose\")")
    dose = primary_dose({"model": profile})
    return line + f"; dose (their mean, docs/mechanism.md) {dose.value:+.3f} [{dose.ci_low:+.3f}, {dose.ci_high:+.3f}]"
