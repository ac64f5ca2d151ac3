"""Statistics every number opct reports goes through: estimates, rates and their intervals.

* :mod:`~opct.stats.estimate`: ``Estimate`` (value, interval, n, clusters, effective n), Wilson,
  bootstrap, paired differences;
* :mod:`~opct.stats.intervals`: cluster-Wilson rates (one-way and crossed), paired cluster
  differences, and the pooled paired difference of a study.

It imports nothing else of opct.
"""
