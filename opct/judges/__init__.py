"""Judges decide what a response did: refused, complied, warned, answered which option."""

from opct.judges.base import Judge, Verdict

__all__ = ["Judge", "Verdict"]
