"""IFEval (Zhou et al. 2023) scored by lm-eval-harness's own instruction checkers.

A thin adapter: :func:`evaluate_response` / :func:`evaluate_item` give the strict and loose verdict
of each instruction exactly as ``lm_eval.tasks.ifeval`` computes them (its ``process_results``), and
:func:`ifeval_metrics` the four standard accuracies. lm-eval, ``immutabledict``, ``langdetect`` and
``nltk`` come with opct's ``data`` extra; the English Punkt sentence data lm-eval's sentence counts
need ships in this package (``nltk_data/``), so scoring never downloads anything
(:mod:`opct.ifeval.checkers`). Importing this package is cheap: lm-eval is imported on first use.
"""

from opct.ifeval.checkers import InstructionError, checker_version, instruction_ids, lm_eval_ifeval
from opct.ifeval.scoring import IFEvalResult, evaluate_item, evaluate_response, ifeval_metrics

__all__ = [
    "IFEvalResult",
    "InstructionError",
    "checker_version",
    "evaluate_item",
    "evaluate_response",
    "ifeval_metrics",
    "instruction_ids",
    "lm_eval_ifeval",
]
