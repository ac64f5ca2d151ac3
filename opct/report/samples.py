"""The per-sample page ``samples.html``: every prompt of every eval with the methods' answers side by side.

One row per prompt (eval, item, variant, sample index), aligned across methods; one column per method
with its answer, the answer's outcome class, parsed label and scores. Four filters (axis, i.e. the
eval, split, method and outcome class) run in a small inline script and are read from the URL's
fragment too (``samples.html#eval=sycophancy&split=heldout&method=opct&outcome=off_options``), so a
cell of the report's results table links to exactly its samples (:func:`cell_links`). The page is
self-contained like ``report.html``; it is rendered from ``templates/samples.html.jinja``, autoescaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from opct.report.experiment import Experiment
from opct.report.table import ResultsTable, method_label
from opct.report.templating import render_page
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


# --------------------------------------------------------------------------- HTML (templates/samples.html.jinja)


def _folded(text: str, limit: int) -> dict[str, str | None]:
    """``text``, with its beginning as the summary of a fold when longer than ``limit`` (else no summary)."""
    if len(text) <= limit and text.count("\n") < 8:
        return {"text": text, "summary": None}
    return {"text": text, "summary": text[:SUMMARY_CHARS].rstrip() + " …"}


def _answer(method: str, answer: Answer | None) -> dict[str, Any] | None:
    if answer is None:
        return None
    label = " ".join(p for p in (answer.parsed and f"→ {answer.parsed}", answer.scores) if p)
    return {"method": method, "outcome": answer.outcome, "label": label, "response": _folded(answer.response, FOLD_RESPONSE)}


def _row(row: PromptRow, methods: list[str]) -> dict[str, Any]:
    earlier = f"(+{row.earlier} earlier message{'s' if row.earlier != 1 else ''})\n" if row.earlier else ""
    return {"eval": row.eval_name, "split": row.split, "item": row.item_id,
            "where": " · ".join(p for p in (row.eval_name, row.split) if p),
            "what": f"{row.item_id} · {row.variant or '—'} · #{row.sample}", "earlier": earlier,
            "prompt": _folded(row.prompt, FOLD_PROMPT), "answers": [_answer(m, row.answers.get(m)) for m in methods]}


def _ordered_outcomes(found: set[str]) -> list[str]:
    return [o for o in OUTCOME_ORDER if o in found] + sorted(found - set(OUTCOME_ORDER))


def _select(key: str, values: Iterable[str], labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"key": key, "label": FILTER_LABELS[key], "options": [(v, (labels or {}).get(v, v)) for v in values]}


def _text_input(key: str, placeholder: str, suggestions: Iterable[str] = ()) -> dict[str, Any]:
    """A text field of the filters (``suggestions``: its ``<datalist>``)."""
    return {"key": key, "label": FILTER_LABELS[key], "options": None, "placeholder": placeholder,
            "suggestions": list(suggestions)}


def render_samples_html(exp: Experiment, rows: list[PromptRow] | None = None, report_name: str = REPORT_HTML) -> str:
    """``samples.html`` for ``exp`` (``templates/samples.html.jinja``): the filters, the count of prompts shown
    and one table row per prompt (``rows``: :func:`sample_rows`'s, computed when not given)."""
    rows = sample_rows(exp) + attack_rows(exp) if rows is None else rows
    methods = [m for m in exp.methods if any(m in r.answers for r in rows)]
    filters = [
        _select("eval", dict.fromkeys(r.eval_name for r in rows)),
        _select("split", sorted({r.split for r in rows if r.split})),
        _select("method", methods, {m: method_label(m) for m in methods}),
        _select("outcome", _ordered_outcomes({a.outcome for r in rows for a in r.answers.values()})),
        _text_input("item", "exact id", dict.fromkeys(r.item_id for r in rows)),
        _text_input("q", "words in the prompt or an answer"),
    ]
    meta = (f"model {exp.model or '—'} · {len(rows)} prompts, "
            f"{sum(len(r.answers) for r in rows)} answers from {len(methods)} method(s) · ")
    return render_page("samples.html.jinja", title=f"OPCT samples: {exp.name}", meta=meta, report_name=report_name,
                       howto=HOWTO, filters=filters, filter_keys=list(FILTERS), text_keys=list(TEXT_FILTERS),
                       methods=[(m, method_label(m)) for m in methods], rows=[_row(r, methods) for r in rows])
