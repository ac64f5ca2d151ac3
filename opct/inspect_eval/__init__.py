"""opct under Inspect AI: every axis and capability eval as an Inspect ``@task``, opct's sampler as an
Inspect model provider (``opct/<model>``), and Inspect logs read back into opct's records.

Registered through the ``inspect_ai`` entry point of the package (``opct.inspect_eval.registry``), so
after ``pip install 'opct[inspect]'``::

    inspect eval opct/sycophancy --model opct/organism
    inspect eval opct/capability_mc --model hf/path/to/final      # any Inspect provider works too
    opct report logs/                                              # opct's table from Inspect logs

Nothing here is imported by ``import opct``; ``inspect_ai`` is an optional dependency.
"""
