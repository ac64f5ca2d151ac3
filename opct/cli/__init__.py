"""The ``opct`` command line: one module per command group.

``main`` (the ``opct`` group: ``train``, ``eval``, ``run``, ``demo``, ``report``, ``export``), ``attack``,
``pairs``, ``organism``, ``env``; ``boundary`` (the error boundary every command runs in, and the
options they share) and ``help`` (how option values are named in every help). Nothing outside this
package imports it: it is the top layer.
"""

from opct.cli.boundary import passive_waiting_when_busy

passive_waiting_when_busy()  # before anything imports torch (OpenMP reads it when it loads)
