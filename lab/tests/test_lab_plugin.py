"""The lab's level builds resolve in a process that imports only opct, as a ``--jobs`` worker is: ``opct-lab``
registers them through the ``opct.plugins`` entry point (lab/pyproject.toml), which the library loads on a miss."""

from __future__ import annotations

import subprocess
import sys

from opct_lab.level_builds import SHIPPED_LEVELS, WEIGHTS, level_alias, level_checkpoint_path


def test_a_bare_opct_process_resolves_every_level_build() -> None:
    aliases = [level_alias(arch, level) for arch, level in SHIPPED_LEVELS]
    code = ("import sys\nfrom opct.models.loading import resolve_model_path\n"
            f"for alias in {aliases!r}:\n"
            "    try:\n        print(resolve_model_path(alias))\n"
            "    except FileNotFoundError as e:\n        print('unbuilt', alias, 'opct-lab build-levels' in str(e))\n"
            "print(sorted(m for m in sys.modules if m.startswith('opct_lab')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    # the lab's resolver answered each: with the folder, or (weights not built yet) naming the command that builds them
    assert [line if line.startswith("unbuilt") else line.rsplit("/", 1)[-1] for line in out[:-1]] == [
        f"unbuilt {alias} True" if not (level_checkpoint_path(arch, level) / WEIGHTS).is_file() else f"{arch}-{level}"
        for alias, (arch, level) in zip(aliases, SHIPPED_LEVELS, strict=True)]
    assert out[-1] == "['opct_lab', 'opct_lab.level_builds']"  # the plugin, loaded on the first miss


def test_the_library_alone_loads_no_plugin_for_its_own_names() -> None:
    code = ("import sys\nfrom opct.models.loading import resolve_model_path\nresolve_model_path('organism')\n"
            "print(any(m.startswith('opct_lab') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
