"""Statistics every number opct reports goes through: estimates, rates and their intervals.

* :mod:`~opct.stats.estimate`: ``Estimate`` (value, interval, n, clusters, effective n), Wilson,
  the seeded bootstrap;
* :mod:`~opct.stats.intervals`: cluster-Wilson rates (one-way and crossed), monotone at the ends;
* :mod:`~opct.stats.paired`: paired cluster differences between two models on shared units, and the
  pooled paired difference of a study;
* :mod:`~opct.stats.paired_proportions`: Tango's score interval for paired proportions (what a "no worse"
  claim reads) and the items such a claim needs;
* :mod:`~opct.stats.agreement`: a judge's agreement with a reader (accuracy, Cohen's kappa, intervals over clusters).

It imports nothing else of opct.
"""
