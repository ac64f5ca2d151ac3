"""``python -m opct_lab``: the ``opct-lab`` command."""

from opct_lab.cli import app

app()
