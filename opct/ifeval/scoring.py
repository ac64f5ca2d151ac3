"""Strict/loose IFEval evaluation of responses and the four standard accuracies.

* **strict**: each instruction is checked on the response as given (an empty response fails).
* **loose**: an instruction passes if it holds for any of eight variants of the response: as given,
  without its first line, without its last line, without both, and each of those four with every
  ``*`` removed (markdown emphasis). Empty variants are skipped.

Metrics (:func:`ifeval_metrics`): prompt-level strict accuracy (all instructions of a prompt pass;
the IFEval paper's headline and OPCT's reported number), prompt-level loose, and instruction-level
strict/loose (fraction of all instructions that pass).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from opct.ifeval.language import active_detector
from opct.ifeval.registry import check_instruction

__all__ = ["IFEvalResult", "evaluate_item", "evaluate_response", "ifeval_metrics", "loose_variants"]


@dataclass
class IFEvalResult:
    """Per-instruction verdicts for one prompt."""

    id: str
    instruction_ids: list[str]
    strict: list[bool]
    loose: list[bool]

    @property
    def prompt_strict(self) -> bool:
        """All instructions pass in strict mode."""
        return all(self.strict)

    @property
    def prompt_loose(self) -> bool:
        """All instructions pass in loose mode."""
        return all(self.loose)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict including the two prompt-level verdicts."""
        return {**asdict(self), "prompt_strict": self.prompt_strict, "prompt_loose": self.prompt_loose}


def loose_variants(response: str) -> list[str]:
    """The eight loose-mode variants of ``response`` (see module docstring), empty ones included."""
    lines = response.split("\n")
    base = [
        response,
        "\n".join(lines[1:]).strip(),
        "\n".join(lines[:-1]).strip(),
        "\n".join(lines[1:-1]).strip(),
    ]
    return base + [v.replace("*", "") for v in base]


def evaluate_response(
    instruction_ids: Sequence[str],
    kwargs_list: Sequence[dict[str, Any]],
    response: str | None,
    *,
    item_id: str = "",
    detector: str = "auto",
) -> IFEvalResult:
    """Check ``response`` against each instruction (strict and loose).

    ``kwargs_list`` has one dict per instruction. Unknown ids or bad kwargs raise
    :class:`opct.ifeval.registry.InstructionError`.
    """
    if len(instruction_ids) != len(kwargs_list):
        raise ValueError(f"{len(instruction_ids)} instruction ids but {len(kwargs_list)} kwargs entries")
    response = response or ""
    variants = [v for v in loose_variants(response) if v.strip()]
    strict, loose = [], []
    for iid, kw in zip(instruction_ids, kwargs_list, strict=True):
        s = bool(response.strip()) and check_instruction(iid, response, kw, detector)
        strict.append(s)
        loose.append(s or any(check_instruction(iid, v, kw, detector) for v in variants[1:]))
    return IFEvalResult(item_id, list(instruction_ids), strict, loose)


def evaluate_item(item: Any, response: str | None, *, detector: str = "auto") -> IFEvalResult:
    """Evaluate a response to an IFEval :class:`opct.datasets.EvalItem` (uses its ``meta``)."""
    meta = item.meta
    return evaluate_response(meta["instruction_id_list"], meta["kwargs"], response, item_id=item.id,
                             detector=detector)


def ifeval_metrics(results: Iterable[IFEvalResult], detector: str = "auto") -> dict[str, Any]:
    """The four IFEval accuracies plus counts and a per-instruction-id breakdown.

    Keys: ``prompt_level_strict_acc``, ``prompt_level_loose_acc``, ``inst_level_strict_acc``,
    ``inst_level_loose_acc``, ``n_prompts``, ``n_instructions``, ``per_instruction``
    (``{id: {"n", "strict_acc", "loose_acc"}}``) and ``language_detector`` (the back-end ``detector``
    resolves to; pass the same value used for evaluation).
    """
    results = list(results)
    n_prompts = len(results)
    flat_strict = [v for r in results for v in r.strict]
    flat_loose = [v for r in results for v in r.loose]
    per: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for r in results:
        for iid, s, lo in zip(r.instruction_ids, r.strict, r.loose, strict=True):
            per[iid].append((s, lo))

    def frac(values: list[bool]) -> float:
        return sum(values) / len(values) if values else 0.0

    return {
        "prompt_level_strict_acc": frac([r.prompt_strict for r in results]),
        "prompt_level_loose_acc": frac([r.prompt_loose for r in results]),
        "inst_level_strict_acc": frac(flat_strict),
        "inst_level_loose_acc": frac(flat_loose),
        "n_prompts": n_prompts,
        "n_instructions": len(flat_strict),
        "per_instruction": {
            iid: {"n": len(v), "strict_acc": frac([s for s, _ in v]), "loose_acc": frac([lo for _, lo in v])}
            for iid, v in sorted(per.items())
        },
        "language_detector": active_detector(detector),
    }
