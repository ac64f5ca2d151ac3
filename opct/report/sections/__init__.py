"""The experiment report's built-in sections (:class:`opct.report.section.Section`), in page order:
``answer`` (the verdict, the warnings, the forest plot), ``judges`` (each judge's measured agreement with a
reader, and which evals it keeps from a headline), ``results`` (the results table and the paper's
numbers; every metric; the experiment's versions and files), ``recipes`` (the recipes and their selection;
the off-policy profile), ``comparisons`` (the ablation, the paired differences, the adaptive attacker) and
``axis_figures`` (each axis's figures and training). They are registered in :data:`opct.report.section.SECTIONS`.
"""
