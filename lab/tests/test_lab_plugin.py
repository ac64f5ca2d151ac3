"""The lab's level builds resolve in a process that imports only opct, as a ``--jobs`` worker is: ``opct-lab``
registers them through the ``opct.plugins`` entry point (lab/pyproject.toml), which the library loads on a miss."""

from __future__ import annotations

import subprocess
import sys

from opct_lab.level_builds import SHIPPED_LEVELS, level_alias


def test_a_bare_opct_process_resolves_every_level_build() -> None:
    aliases = [level_alias(arch, level) for arch, level in SHIPPED_LEVELS]
    code = ("import sys\nfrom opct.models.loading import resolve_model_path\n"
            f"for alias in {aliases!r}:\n    print(resolve_model_path(alias))\n"
            "print(sorted(m for m in sys.modules if m.startswith('opct_lab')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert [line.rsplit("/", 1)[-1] for line in out[:-1]] == [f"{arch}-{level}" for arch, level in SHIPPED_LEVELS]
    assert out[-1] == "['opct_lab', 'opct_lab.level_builds']"  # the plugin, loaded on the first miss


def test_the_library_alone_loads_no_plugin_for_its_own_names() -> None:
    code = ("import sys\nfrom opct.models.loading import resolve_model_path\nresolve_model_path('organism')\n"
            "print(any(m.startswith('opct_lab') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
