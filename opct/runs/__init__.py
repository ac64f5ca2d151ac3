"""A training run's directory: its layout, lifecycle and artifacts.

:class:`~opct.runs.directory.RunDirectory` is the one object that knows where things are in a run
directory and what may happen to them (create, lock, log, checkpoint, resume, manifest, final model);
the modules behind it each do one job:

* :mod:`~opct.runs.layout`: every path inside a run directory (``RunLayout``);
* :mod:`~opct.runs.lock`: one training per directory at a time;
* :mod:`~opct.runs.checkpoint`: ``checkpoints/step-N/``, hashed safetensors and JSON;
* :mod:`~opct.runs.resume`: whether and how a rerun continues;
* :mod:`~opct.runs.logs`: ``metrics.jsonl`` and ``rollouts.jsonl.gz``, appended and repaired;
* :mod:`~opct.runs.manifest`: what was run, on what, with which versions (every command's manifest);
* :mod:`~opct.runs.final` and :mod:`~opct.runs.model_card`: ``final/`` and what it says about itself;
* :mod:`~opct.runs.trained`: a trained model folder loaded as what it claims (its record, no remote code
  without the command's consent, exactly its tensors);
* :mod:`~opct.runs.outputs`: who owns an output folder (a run, an eval, an attack, an export...), and its lock;
* :mod:`~opct.runs.errors`: the run directory's errors and warning.
"""
