"""Evaluation: tasks (what to ask and how to judge it), and the resumable runner."""

from opct.evals.runner import EvalResult, run_task
from opct.evals.task import EvalTask, Unit

__all__ = ["EvalResult", "EvalTask", "Unit", "run_task"]
