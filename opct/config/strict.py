"""The base of every settings section: unknown keys are errors, every number is finite and declares its range
(:mod:`opct.config.ranges`), and the range limits no run means."""

from __future__ import annotations

from pydantic import ConfigDict

from opct.config.ranges import DeclaredRanges

#: Range checks for values no run means: a temperature above 10 samples noise (the next-token
#: distribution is flat to within a few percent), and ten million steps or ten thousand epochs is a
#: run that never ends on any machine opct targets; a typo (1e9, 1e23) is refused, naming the key.
MAX_TEMPERATURE = 10.0
MAX_STEPS = 10_000_000
MAX_EPOCHS = 10_000.0


class _Strict(DeclaredRanges):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


#: The base of every settings section (a method's own included): an unknown key is an error, a number outside its
#: declared range too.
StrictSettings = _Strict
