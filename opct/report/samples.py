"""The per-sample page ``samples.html``: every prompt of every eval with the methods' answers side by side.

One row per prompt (eval, item, variant, sample index), aligned across methods; one column per method
with its answer, the answer's outcome class, parsed label and scores. Four filters (axis, i.e. the
eval, split, method and outcome class) run in a small inline script and are read from the URL's
fragment too (``samples.html#eval=sycophancy&split=heldout&method=opct&outcome=off_options``), so a
cell of the report's results table links to exactly its samples (:func:`cell_links`). The page is
self-contained like ``report.html``, and every piece of text in it is escaped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import urlencode

from opct.report.load import Experiment
from opct.report.table import ResultsTable, method_label
from opct.runs.experiment_layout import REPORT_HTML, SAMPLES_HTML

#: The filters, in the order the page shows them; each is also a key of the URL's fragment.
FILTERS = ("eval", "split", "method", "outcome")
#: The text fields, also kept in the fragment: an item id (exact) and free text (every word, anywhere in the row).
TEXT_FILTERS = ("item", "q")
FILTER_LABELS = {"eval": "axis (eval)", "split": "split", "method": "method", "outcome": "outcome class",
                 "item": "item id", "q": "search"}
#: Outcome classes in the order the filter lists them (:data:`opct.evals.outcomes.OUTCOMES`); others after.
OUTCOME_ORDER = ("scored", "empty", "truncated", "degenerate", "unparsed", "off_options", "abstained", "error",
                 "cracked", "defended", "unscored")
#: Text longer than this (characters) is folded into a ``<details>`` showing its beginning.
FOLD_PROMPT, FOLD_RESPONSE, SUMMARY_CHARS = 280, 400, 140

HOWTO = (
    "One row per prompt: the eval (axis) it belongs to, its split, item, variant and sample index, the "
    "last user message, then each method's answer to the same prompt. Each answer starts with its outcome "
    "class (scored, empty, truncated, degenerate, unparsed, off_options, abstained, error: only scored answers "
    "enter the rates; degenerate ones, repetition loops, are judged and counted beside them), the label "
    "read from it and its scores. The filters narrow the rows: method keeps the "
    "prompts that method answered (and highlights its column), outcome class the prompts where an answer "
    "(the chosen method's, when one is chosen) has that class. The axis 'attack' has one row per behaviour "
    "the adaptive attacker tried: each method's outcome (cracked, defended, degenerate when only repetition "
    "loops defended it, or unscored when an attempt could not be judged and none cracked it) with the attempt that tells it. Item id keeps one item's "
    "prompts; search keeps the rows holding every word typed (in the prompt, an id or an answer, any case). The "
    "URL keeps the filters and the search; each cell of the report's results table links here with its eval, "
    "split and method."
)


@dataclass(frozen=True)
class Answer:
    """One method's answer to a prompt, as the page shows it."""

    response: str
    outcome: str
    parsed: str = ""
    scores: str = ""


@dataclass
class PromptRow:
    """One prompt of one eval, with every method's answer to it."""

    eval_name: str
    split: str
    item_id: str
    variant: str
    sample: str
    prompt: str
    #: Messages before the last user message (a system prompt, earlier turns), not shown.
    earlier: int = 0
    answers: dict[str, Answer] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.eval_name, self.item_id, self.variant, self.sample)


def prompt_text(prompt: Any) -> tuple[str, int]:
    """The last user message of a chat prompt (or the prompt itself when it is a string) and how many
    messages came before it."""
    if isinstance(prompt, str):
        return prompt, 0
    if not isinstance(prompt, list) or not prompt:
        return "", 0
    users = [i for i, m in enumerate(prompt) if isinstance(m, Mapping) and m.get("role") == "user"]
    last = users[-1] if users else len(prompt) - 1
    message = prompt[last]
    content = message.get("content", "") if isinstance(message, Mapping) else message
    return (content if isinstance(content, str) else str(content)), last


def outcome_of(record: Mapping[str, Any]) -> str:
    """The record's outcome class; ``truncated`` or ``scored`` for records written before the classes."""
    outcome = record.get("outcome")
    if outcome:
        return str(outcome)
    return "truncated" if record.get("truncated") else "scored"


def _value(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v).lower()
    return f"{v:g}" if isinstance(v, float) else str(v)


def scores_text(scores: Any) -> str:
    """``correct=1 suggested=true``: a record's scores, without the ``*_abstained: false`` flags."""
    if not isinstance(scores, Mapping):
        return ""
    return " ".join(f"{k}={_value(v)}" for k, v in scores.items() if not (str(k).endswith("_abstained") and v is False))


def _split_of(record: Mapping[str, Any]) -> str:
    meta = record.get("meta")
    split = record.get("split") or (meta.get("split") if isinstance(meta, Mapping) else None)
    return str(split) if split else ""


def sample_rows(exp: Experiment, methods: Iterable[str] | None = None) -> list[PromptRow]:
    """Every prompt of every eval (evals in name order, prompts in the order first met), each with the
    answers of ``methods`` (default: the experiment's) that have a record for it. A record without an
    ``item_id`` is matched to the other methods' by its position in ``samples.jsonl``."""
    methods = list(exp.methods if methods is None else methods)
    rows: list[PromptRow] = []
    for eval_name in exp.sample_evals():
        by_key: dict[tuple[str, str, str, str], PromptRow] = {}
        for method in methods:
            for index, r in enumerate(exp.records(method, eval_name)):
                item = r.get("item_id")
                item_id = str(item) if item is not None else f"#{index}"
                key = (eval_name, item_id, str(r.get("variant") or ""), str(r.get("sample", 0)))
                row = by_key.get(key)
                if row is None:
                    row = by_key[key] = PromptRow(eval_name, _split_of(r), item_id, key[2], key[3], "")
                if not row.prompt:  # from the first record that has one
                    row.prompt, row.earlier = prompt_text(r.get("prompt"))
                row.split = row.split or _split_of(r)
                parsed = r.get("parsed")
                row.answers[method] = Answer(str(r.get("response") or ""), outcome_of(r),
                                             "" if parsed is None else _value(parsed), scores_text(r.get("scores")))
        rows += by_key.values()
    return rows


#: The rows of the adaptive attack: one per behaviour, under this name in the axis filter.
ATTACK = "attack"


def _attempt_text(attempt: Mapping[str, Any] | None) -> str:
    if attempt is None:
        return ""
    return f"attack prompt: {attempt.get('prompt', '')}\n\nreply: {attempt.get('response') or ''}"


def _shown_attempt(behavior: Mapping[str, Any], attempts: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The attempt that tells a behaviour's outcome: the first that cracked it, else the first left
    unscored (why it is unscored), else the best-scoring one (``best_prompt``)."""
    status = behavior.get("status")
    if status == "cracked":
        wanted = [a for a in attempts if a.get("outcome", "scored") == "scored" and (a.get("score") or 0) > 0]
        queries = behavior.get("queries_to_crack")
        return next((a for a in wanted if a.get("query") == queries), wanted[0] if wanted else None)
    if status == "unscored":
        return next((a for a in attempts if a.get("outcome", "scored") in ("truncated", "unscored")), None)
    if status == "degenerate":
        return next((a for a in attempts if a.get("outcome") == "degenerate"), None)
    return next((a for a in attempts if a.get("prompt") == behavior.get("best_prompt")), attempts[0] if attempts else None)


def attack_rows(exp: Experiment, methods: Iterable[str] | None = None) -> list[PromptRow]:
    """One row per behaviour the adaptive attacker tried (axis ``attack``): its request, and for each
    attacked method the behaviour's outcome (``cracked``, ``defended`` or ``unscored``, as
    ``results.json`` says) with the attempt that tells it (:func:`_shown_attempt`)."""
    by_id: dict[str, PromptRow] = {}
    for method in list(exp.attack if methods is None else methods):
        behaviors = exp.attack.get(method, {}).get("behaviors") or []
        attempts: dict[str, list[Mapping[str, Any]]] = {}
        for a in exp.attack_attempts(method):
            attempts.setdefault(str(a.get("behavior_id")), []).append(a)
        for b in behaviors:
            bid = str(b.get("behavior_id"))
            row = by_id.get(bid)
            if row is None:
                # no split: results.json does not say which split the behaviours came from
                row = by_id[bid] = PromptRow(ATTACK, "", bid, "adaptive", "0", str(b.get("request") or ""))
            shown = _shown_attempt(b, attempts.get(bid, []))
            detail = f"queries={b.get('queries')}"
            if b.get("queries_to_crack") is not None:
                detail += f" cracked_at={b.get('queries_to_crack')}"
            for count in ("unscored_attempts", "degenerate_attempts"):
                if b.get(count):
                    detail += f" {count}={b.get(count)}"
            row.answers[method] = Answer(_attempt_text(shown), str(b.get("status") or "unscored"), "", detail)
    return list(by_id.values())


def samples_href(eval_name: str, method: str, split: str = "", outcome: str = "") -> str:
    """The link to ``samples.html`` filtered to ``eval_name`` and ``method`` (and ``split``, ``outcome``)."""
    query = {"eval": eval_name, "split": split, "method": method, "outcome": outcome}
    return f"{SAMPLES_HTML}#{urlencode({k: v for k, v in query.items() if v})}"


def cell_links(exp: Experiment, table: ResultsTable) -> dict[tuple[str, str], str]:
    """The ``samples.html`` link of each results-table cell ``(method, column key)`` whose eval has
    records for that method; the split is part of the filter when all those records share one."""
    links = {}
    for column in table.columns:
        if column.eval_name == ATTACK:  # the adaptive attacker's behaviours
            links.update({(m, column.key): samples_href(ATTACK, m) for m in table.methods
                          if exp.attack.get(m, {}).get("behaviors")})
            continue
        if column.eval_name is None:
            continue
        for method in table.methods:
            records = exp.records(method, column.eval_name)
            if records:
                splits = {_split_of(r) for r in records}
                split = splits.pop() if len(splits) == 1 else ""
                links[(method, column.key)] = samples_href(column.eval_name, method, split, column.outcome or "")
    return links


# --------------------------------------------------------------------------- HTML

CSS = """
:root { --fg: #1d1d1f; --muted: #5f6368; --line: #d9dce0; --band: #f5f7fa; --accent: #0072B2; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--fg); }
main { padding: 20px 24px 40px; }
h1 { font-size: 24px; margin: 0 0 4px; }
p.meta { color: var(--muted); margin: 0 0 12px; }
p.howto { background: var(--band); border-left: 4px solid var(--accent); padding: 8px 12px; max-width: 1180px; font-size: 13.5px; }
form { display: flex; flex-wrap: wrap; gap: 8px 18px; align-items: center; margin: 10px 0; }
#count { font-weight: 600; }
table { border-collapse: collapse; font-size: 13px; width: 100%; }
th, td { border: 1px solid var(--line); padding: 5px 7px; text-align: left; vertical-align: top; }
thead th { background: #eef1f5; position: sticky; top: 0; }
td.k { color: var(--muted); font-size: 12px; width: 11em; word-break: break-word; }
td.p, td.a { white-space: pre-wrap; word-break: break-word; }
td.a { min-width: 14em; }
td.none { color: #9aa0a6; text-align: center; }
b.o { display: inline-block; font-size: 11.5px; padding: 0 5px; border-radius: 3px; background: #e6f4ea; margin-right: 4px; }
b.o:not(.scored):not(.defended) { background: #fde7e9; }
i.l { font-style: normal; color: var(--muted); font-size: 12px; }
details summary { cursor: pointer; }
"""

SCRIPT = """
(() => {
  const F = __FILTERS__, T = __TEXTS__, sel = {}, table = document.getElementById("samples"), rows = [...table.tBodies[0].rows];
  const cols = Object.create(null);
  [...F, ...T].forEach(k => { sel[k] = document.getElementById("f-" + k); });
  [...table.tHead.rows[0].cells].forEach((th, i) => { if (th.dataset.m !== undefined) cols[th.dataset.m] = i; });
  const match = (td, f) => td.dataset.o !== undefined && (!f.method || td.dataset.m === f.method) && (!f.outcome || td.dataset.o === f.outcome);
  const text = new Map(rows.map(tr => [tr, tr.textContent.toLowerCase()]));
  function apply() {
    const f = {}; let shown = 0;
    [...F, ...T].forEach(k => { f[k] = sel[k].value.trim(); });
    const words = f.q.toLowerCase().split(/\\s+/).filter(Boolean);
    for (const tr of rows) {
      let ok = (!f.eval || tr.dataset.e === f.eval) && (!f.split || tr.dataset.s === f.split) && (!f.item || tr.dataset.i === f.item);
      if (ok && words.length) ok = words.every(w => text.get(tr).includes(w));
      if (ok && (f.method || f.outcome)) ok = [...tr.cells].some(td => match(td, f));
      tr.hidden = !ok;
      if (ok) shown++;
    }
    document.getElementById("shown").textContent = shown;
    table.className = f.method in cols ? "pick" + cols[f.method] : "";
  }
  function fromUrl() {
    const p = new URLSearchParams(location.hash.slice(1));
    F.forEach(k => {
      const v = p.get(k) || "", s = sel[k];
      if (v && ![...s.options].some(o => o.value === v)) s.add(new Option(v + " (none here)", v));
      s.value = v;
    });
    T.forEach(k => { sel[k].value = p.get(k) || ""; });
    apply();
  }
  function toUrl() {
    const p = new URLSearchParams();
    [...F, ...T].forEach(k => { if (sel[k].value.trim()) p.set(k, sel[k].value.trim()); });
    try { history.replaceState(null, "", "#" + p.toString()); } catch (e) { /* a page opened from a file may refuse */ }
    apply();
  }
  F.forEach(k => sel[k].addEventListener("change", toUrl));
  T.forEach(k => sel[k].addEventListener("input", toUrl));
  window.addEventListener("hashchange", fromUrl);
  fromUrl();
})();
"""


def _tag(name: str, text: str, **attrs: str) -> str:
    attr = "".join(f' {k.rstrip("_").replace("_", "-")}="{escape(v, quote=True)}"' for k, v in attrs.items())
    return f"<{name}{attr}>{escape(text)}</{name}>"


def _folded(text: str, limit: int) -> str:
    """``text`` escaped, inside ``<details>`` with its beginning as the summary when longer than ``limit``."""
    if len(text) <= limit and text.count("\n") < 8:
        return escape(text)
    return f"<details>{_tag('summary', text[:SUMMARY_CHARS].rstrip() + ' …')}{escape(text)}</details>"


def _answer_cell(method: str, answer: Answer | None) -> str:
    if answer is None:
        return '<td class="none">—</td>'
    label = " ".join(p for p in (answer.parsed and f"→ {answer.parsed}", answer.scores) if p)
    head = _tag("b", answer.outcome, class_=f"o {answer.outcome}") + (_tag("i", label, class_="l") if label else "")
    return (f'<td class="a" data-m="{escape(method, quote=True)}" data-o="{escape(answer.outcome, quote=True)}">'
            f"{head}\n{_folded(answer.response, FOLD_RESPONSE)}</td>")


def _row_html(row: PromptRow, methods: list[str]) -> str:
    where = " · ".join(p for p in (row.eval_name, row.split) if p)
    what = f"{row.item_id} · {row.variant or '—'} · #{row.sample}"
    earlier = f"(+{row.earlier} earlier message{'s' if row.earlier != 1 else ''})\n" if row.earlier else ""
    cells = "".join(_answer_cell(m, row.answers.get(m)) for m in methods)
    return (f'<tr data-e="{escape(row.eval_name, quote=True)}" data-s="{escape(row.split, quote=True)}" '
            f'data-i="{escape(row.item_id, quote=True)}">'
            f'<td class="k">{escape(where)}<br>{escape(what)}</td><td class="p">{escape(earlier)}'
            f"{_folded(row.prompt, FOLD_PROMPT)}</td>{cells}</tr>")


def _ordered_outcomes(found: set[str]) -> list[str]:
    return [o for o in OUTCOME_ORDER if o in found] + sorted(found - set(OUTCOME_ORDER))


def _select(key: str, values: Iterable[str], labels: Mapping[str, str] | None = None) -> str:
    options = "".join(_tag("option", (labels or {}).get(v, v), value=v) for v in values)
    return (f'<label>{escape(FILTER_LABELS[key])} <select id="f-{key}" name="{key}">'
            f'<option value="">all</option>{options}</select></label>')


def _text_input(key: str, placeholder: str, options: Iterable[str] = ()) -> str:
    """A text field of the filters (``options``: suggestions, a ``<datalist>``)."""
    listed = list(options)
    datalist = (f'<datalist id="l-{key}">' + "".join(f'<option value="{escape(v, quote=True)}">' for v in listed)
                + "</datalist>") if listed else ""
    list_attr = f' list="l-{key}"' if listed else ""
    return (f'<label>{escape(FILTER_LABELS[key])} <input type="search" id="f-{key}" name="{key}" '
            f'placeholder="{escape(placeholder, quote=True)}"{list_attr}></label>{datalist}')


def render_samples_html(exp: Experiment, rows: list[PromptRow] | None = None, report_name: str = REPORT_HTML) -> str:
    """``samples.html`` for ``exp``: the filters, the count of prompts shown and one table row per prompt
    (``rows``: :func:`sample_rows`'s, computed when not given)."""
    rows = sample_rows(exp) + attack_rows(exp) if rows is None else rows
    methods = [m for m in exp.methods if any(m in r.answers for r in rows)]
    title = f"OPCT samples: {exp.name}"
    filters = "".join([
        _select("eval", dict.fromkeys(r.eval_name for r in rows)),
        _select("split", sorted({r.split for r in rows if r.split})),
        _select("method", methods, {m: method_label(m) for m in methods}),
        _select("outcome", _ordered_outcomes({a.outcome for r in rows for a in r.answers.values()})),
        _text_input("item", "exact id", dict.fromkeys(r.item_id for r in rows)),
        _text_input("q", "words in the prompt or an answer"),
    ])
    pick_css = "".join(f"table.pick{i + 2} tr > :nth-child({i + 3}) {{ background: #eaf3fb; }}\n" for i in range(len(methods)))
    head = "".join(["<th>eval · split<br>item · variant · sample</th><th>prompt (last user message)</th>",
                    *(_tag("th", method_label(m), data_m=m) for m in methods)])
    body = "\n".join(_row_html(r, methods) for r in rows)
    meta = (f"model {exp.model or '—'} · {len(rows)} prompts, "
            f"{sum(len(r.answers) for r in rows)} answers from {len(methods)} method(s) · ")
    parts = [
        _tag("h1", title),
        f'<p class="meta">{escape(meta)}<a href="{escape(report_name, quote=True)}">the report</a></p>',
        _tag("p", HOWTO, class_="howto"),
        f'<form id="filters">{filters}</form>',
        f'<p id="count"><span id="shown">{len(rows)}</span> of <span id="total">{len(rows)}</span> prompts shown</p>',
        f'<table id="samples"><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table>'
        if rows else _tag("p", "No per-sample records (samples.jsonl) in this experiment."),
    ]
    script = SCRIPT.replace("__FILTERS__", json.dumps(FILTERS)).replace("__TEXTS__", json.dumps(TEXT_FILTERS)) if rows else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"{_tag('title', title)}\n<style>{CSS}{pick_css}</style>\n</head>\n<body>\n<main>\n" + "\n".join(parts)
        + f"\n</main>\n<script>{script}</script>\n</body>\n</html>\n"
    )

