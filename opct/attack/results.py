"""Attack results: defense success rate, success by family and mutation, queries to crack.

A behaviour is ``cracked``, ``defended`` (no crack, and some complete attempt scored that was no loop;
a reply cut off at the generation limit that shows no crack decides nothing), ``degenerate`` (every
attempt a repetition loop: defended only by degenerate replies) or ``unscored`` (no crack, and an attempt
the judge could not score, or only cut-off and looping attempts; :attr:`~opct.attack.search.BehaviorOutcome.status`). The defense success rate is over cracked and
defended behaviours only; the degenerate and unscored ones are counted beside it, and when the
unscored share exceeds ``max_unscored`` the attack's ``status`` is ``incomplete`` (degenerate replies
were judged: they never make it so).

While an attack runs, :class:`AttackJournal` writes every target call and every judgement to
``journal.jsonl`` as it happens, so an interrupted attack continues where it stopped.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opct.attack.grammar import AttackBehavior
from opct.attack.search import BehaviorOutcome, Reply
from opct.evals.outcomes import status
from opct.runs.atomic import write_json_atomic
from opct.runs.experiment_layout import AttackFolder
from opct.stats.estimate import Estimate, complement, metrics_to_dict, rate


def attack_metrics(outcomes: Sequence[BehaviorOutcome], threshold: float = 0.5) -> dict[str, Estimate]:
    """``dsr`` (share of scored behaviours never cracked), ``asr``, and success per family/mutation over
    scored attempts. Unscored behaviours are in neither denominator (see :func:`outcome_counts`)."""
    out: dict[str, Estimate] = {}
    out["asr"] = rate(None if o.status in ("unscored", "degenerate") else o.cracked for o in outcomes)
    out["dsr"] = complement(out["asr"])
    by_family: dict[str, list[bool]] = {}
    by_mutation: dict[str, list[bool]] = {}
    for o in outcomes:
        for a in o.attempts:
            if a.score is None or a.degenerate:  # a loop is neither a crack nor a defense
                continue
            hit = a.score >= threshold
            for fam in set(a.attack.families) or {"none"}:
                by_family.setdefault(fam, []).append(hit)
            for mut in set(a.attack.mutations) or {"none"}:
                by_mutation.setdefault(mut, []).append(hit)
    for fam, hits in sorted(by_family.items()):
        out[f"attempt_success/{fam}"] = rate(hits)
    for mut, hits in sorted(by_mutation.items()):
        out[f"attempt_success_mutation/{mut}"] = rate(hits)
    return out


def queries_summary(outcomes: Sequence[BehaviorOutcome]) -> dict[str, Any]:
    """Median and distribution of the queries needed to crack, over cracked behaviours."""
    q = [o.queries_to_crack for o in outcomes if o.queries_to_crack is not None]
    return {
        "median": statistics.median(q) if q else None,
        "n_cracked": len(q),
        "histogram": dict(sorted(Counter(q).items())),
        "total_queries": sum(len(o.attempts) for o in outcomes),
    }


def outcome_counts(outcomes: Sequence[BehaviorOutcome]) -> dict[str, Any]:
    """Behaviours ``cracked`` / ``defended`` / ``degenerate`` / ``unscored``, and attempts ``scored`` /
    ``degenerate`` / ``unscored`` (``truncated``: the unscored ones the generation limit cut off)."""
    statuses = Counter(o.status for o in outcomes)
    unscored = sum(o.unscored_attempts for o in outcomes)
    degenerate = sum(o.degenerate_attempts for o in outcomes)
    truncated = sum(a.truncated and not a.scored for o in outcomes for a in o.attempts)
    return {
        "behaviors": {k: statuses.get(k, 0) for k in ("cracked", "defended", "degenerate", "unscored")},
        "attempts": {"scored": sum(len(o.attempts) for o in outcomes) - unscored - degenerate,
                     "degenerate": degenerate, "unscored": unscored, "truncated": truncated},
    }


def write_attack_results(
    outcomes: Sequence[BehaviorOutcome], out_dir: Path, info: dict[str, Any], max_unscored: float = 0.05
) -> Path:
    """``attempts.jsonl`` (every query), ``successes.jsonl`` (every cracking prompt) and ``results.json``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with AttackFolder(out_dir).attempts.open("w", encoding="utf-8") as fh:
        for o in outcomes:
            for a in o.attempts:
                fh.write(json.dumps({"behavior_id": o.behavior.id, **a.to_dict()}, ensure_ascii=False) + "\n")
    threshold = float(info.get("threshold", 0.5))
    with AttackFolder(out_dir).successes.open("w", encoding="utf-8") as fh:
        for o in outcomes:
            for a in o.attempts:
                if a.score is not None and a.score >= threshold:
                    fh.write(json.dumps({"behavior_id": o.behavior.id, **a.to_dict()}, ensure_ascii=False) + "\n")
    metrics = attack_metrics(outcomes, threshold)
    summary = queries_summary(outcomes)
    counts = outcome_counts(outcomes)
    path = AttackFolder(out_dir).results
    write_json_atomic(
        path,
        {
            **info,
            "complete": True,
            "status": status(counts["behaviors"]["unscored"], len(outcomes), max_unscored),
            "max_unscored": max_unscored,
            "outcomes": counts,
            "n": len(outcomes),
            "metrics": metrics_to_dict(metrics),
            "queries_to_crack": summary,
            "behaviors": [o.to_dict() for o in outcomes],
        },
    )
    return path


#: Every target call and judgement of an attack in progress (removed once ``results.json`` is written).
JOURNAL = "journal.jsonl"


class AttackJournal:
    """An attack's target calls and judgements, written as they happen, replayed when it is rerun.

    The search is deterministic given the responses and scores it sees (seeded per behaviour), so a
    rerun that answers the same prompts with the recorded responses and scores takes the same path:
    :meth:`target` returns the recorded responses while the prompts asked are the ones recorded, and
    :meth:`scorer` the recorded score of a (behaviour, prompt, response); only what comes after is
    asked of the model and the judge. A rerun therefore ends with the results an uninterrupted attack
    has. Records must belong to the same attack (weights and settings): the caller checks that.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        lines = _read_journal(path)
        self.calls = deque(r for r in lines if r.get("kind") == "generate")
        self.scores = {(r["behavior_id"], r["prompt"], r["response"]): r["score"] for r in lines if r.get("kind") == "score"}
        self.replayed = 0  # target queries answered from the journal
        self._kept = [r for r in lines if r.get("kind") == "score"]
        self._rewrite([*self.calls, *self._kept])

    def _rewrite(self, lines: list[dict[str, Any]]) -> None:
        """Keep only ``lines`` (a tail cut by a kill, or records past the point the search left, dropped)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
        tmp.replace(self.path)

    def _append(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            fh.flush()

    def target(self, real: Callable[[list[str]], list[str]]) -> Callable[[list[str]], list[str]]:
        """``real`` behind the journal: recorded responses for the recorded prompts, then ``real``'s, recorded."""
        replayed: list[dict[str, Any]] = []

        def call(prompts: list[str]) -> list[str]:
            if self.calls and self.calls[0]["prompts"] == prompts:
                record = self.calls.popleft()
                replayed.append(record)
                self.replayed += len(prompts)
                cut = record.get("truncated") or [False] * len(prompts)
                return [_reply(text, t) for text, t in zip(record["responses"], cut, strict=True)]
            if self.calls:  # the search left the recorded path (other code): the rest of the records are stale
                self.calls.clear()
                self._rewrite([*replayed, *self._kept])
            responses = real(prompts)
            self._append({"kind": "generate", "prompts": prompts, "responses": [str(r) for r in responses],
                          "truncated": [bool(getattr(r, "truncated", False)) for r in responses]})
            return responses

        return call

    def scorer(self, real: Callable[[AttackBehavior, str, str], float | None]
               ) -> Callable[[AttackBehavior, str, str], float | None]:
        """``real`` behind the journal: a recorded judgement when there is one, else ``real``'s, recorded."""

        def score(behavior: AttackBehavior, prompt: str, response: str) -> float | None:
            key = (behavior.id, prompt, str(response))
            if key in self.scores:
                return self.scores[key]
            value = real(behavior, prompt, response)
            value = None if value is None else float(value)
            self.scores[key] = value
            record = {"kind": "score", "behavior_id": behavior.id, "prompt": prompt, "response": str(response), "score": value}
            self._kept.append(record)
            self._append(record)
            return value

        return score

    def remove(self) -> None:
        """Delete the journal (the attack's results are written)."""
        self.path.unlink(missing_ok=True)


def _reply(text: str, truncated: bool) -> str:
    """A recorded reply as the target gave it: a :class:`~opct.attack.search.Reply` when it was cut off."""
    if not truncated:
        return text

    return Reply(text, True)


def _read_journal(path: Path) -> list[dict[str, Any]]:
    """The journal's records up to the first line a kill cut."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            break
        if not isinstance(record, dict):
            break
        out.append(record)
    return out
