"""``python -m opct.cli``: the ``opct`` command (what ``accelerate launch -m opct.cli`` runs)."""

import sys

from opct.cli.main import main

sys.exit(main())
