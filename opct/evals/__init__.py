"""Evaluation: tasks (what to ask and how to judge it), and the resumable runner.

The runner is imported on first use (``opct.evals.run_task``), so that an axis reading its task
contract does not load the models behind the runner."""

from __future__ import annotations

from typing import Any

__all__ = ["EvalResult", "run_task"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from opct.evals import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'opct.evals' has no attribute {name!r}")
