"""opct-lab: the paper's studies, built on the opct library (which never imports this package).

What lives here: recipe selection and its rules (:mod:`opct_lab.selection`), the multi-family study runner and
its steps (:mod:`opct_lab.study`), the pooled study report, the levels' dose-response analysis and RL's Razor
(:mod:`opct_lab.report`), KL to the base (:mod:`opct_lab.diagnostics`), the study files and their selection
evidence (``studies/``) and the level builds (``checkpoints/``). Importing the package registers the level
builds' model aliases into opct's registry (:func:`opct_lab.level_builds.register_level_aliases`).
"""

from __future__ import annotations

from opct_lab.level_builds import register_level_aliases

register_level_aliases()
