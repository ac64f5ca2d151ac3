"""The experiment report: ``report.html`` (self-contained) and ``report.md`` with matplotlib figures,
and ``samples.html``, every prompt with the methods' answers side by side (:mod:`opct.report.samples`).

``write_report(exp_dir)`` reads an experiment directory (see :mod:`opct.report.load` for the layout),
draws the figures into ``<exp>/figures/`` and writes the three pages beside them;
``format_results_table(exp_dir)`` gives the paper-style table as wide plain text (report.md's layout,
for logs and tests). The terminal gets it transposed to fit 80 columns: :mod:`opct.report.terminal`.
"""

from __future__ import annotations

import time
from pathlib import Path

from opct.report.experiment import Experiment
from opct.report.load import load_experiment
from opct.report.table import PAPER_HEADERS, PAPER_ROWS, build_table, render_text, scale_note

__all__ = ["Experiment", "format_results_table", "load_experiment", "write_report"]


def write_report(experiment_dir: Path, out: Path | None = None) -> tuple[Path, Path]:
    """Write ``report.html``, ``report.md``, ``report.json`` (every number, :func:`opct.report.verdict.report_data`,
    and under ``"sections"`` what a registered section adds, :mod:`opct.report.section`) and ``samples.html``
    (and ``figures/*.png``) of ``experiment_dir`` into ``out`` (default: ``experiment_dir`` itself). Which folders may be written is the caller's to check
    (:mod:`opct.report.folders`; ``opct report`` does).

    Returns ``(html_path, md_path)``. Raises FileNotFoundError when the directory does not exist.
    """
    import json

    from opct.report.figures import make_figures
    from opct.report.forest import plot_forest
    from opct.report.paired import paired_differences
    from opct.report.render import render_pages
    from opct.report.samples import attack_rows, cell_links, render_samples_html, sample_rows
    from opct.report.verdict import report_data
    from opct.runs.experiment_layout import ExperimentLayout

    root = Path(experiment_dir)
    exp = load_experiment(root)
    dest = Path(out) if out is not None else root
    layout = ExperimentLayout(dest)  # the report's files, in the experiment or in --out
    table = build_table(exp)
    differences = paired_differences(exp, table.columns)  # the bootstraps run once for every document
    figures = make_figures(exp, layout.figures, extra=[("forest", "verdict", lambda: plot_forest(differences))])
    generated = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    html_path, md_path = layout.report_html, layout.report_md
    rows = sample_rows(exp) + attack_rows(exp)  # read before the reports, so that an unreadable line is among their warnings
    _write_atomic(layout.samples_html, render_samples_html(exp, rows, html_path.name))
    html, md, sections = render_pages(exp, table, differences, figures, generated, cell_links(exp, table), bool(rows))
    _write_atomic(html_path, html)
    _write_atomic(md_path, md)
    data = report_data(exp, table, differences)
    if sections:  # what registered sections add (opct.report.section); the built-in ones add nothing
        data["sections"] = sections
    _write_atomic(layout.report_json, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return html_path, md_path


def format_results_table(exp_dir: str | Path) -> str:
    """The paper-style results table of ``exp_dir`` as wide plain text (one row per method), the paired
    differences and the paper's numbers below it; ``opct run``/``report`` print
    :func:`opct.report.terminal.results_group` instead."""
    from opct.report.paired import paired_table

    exp = load_experiment(exp_dir)
    table = build_table(exp)
    lines = [f"{exp.name} ({exp.model or 'model unknown'})", render_text(table.headers, table.rows()), ""]
    pheaders, prows = paired_table(exp, table.columns)
    if prows:
        lines += ["Paired differences on the same units (95% paired cluster bootstrap; k units):",
                  render_text(pheaders, prows), ""]
    return "\n".join([*lines, render_text(PAPER_HEADERS, PAPER_ROWS), scale_note(exp)])


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
