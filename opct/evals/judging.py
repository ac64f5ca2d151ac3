"""Scoring a batch of responses, each judge asked about the whole batch at once.

A scorer that asks judges is written as a :class:`JudgedScorer`: ``asks(unit, response)`` lists the
judge calls one response needs (which judge, about which request, with which meta), all known before
any verdict, and ``decide(unit, response, verdicts)`` turns their verdicts into its
:class:`~opct.evals.contract.Judgement`. Called on one response it is an ordinary scorer, its judges asked
one after the other. :func:`score_batch` asks each judge about every response of a batch in one
:func:`~opct.judges.judge.judge_many` call, so a served judge
(:class:`~opct.judges.http.HTTPJudge`) keeps ``concurrency`` requests in flight
(``$OPCT_JUDGE_CONCURRENCY``); the judgements are the same, in the same order. Any other scorer is
called once per response.

What a failure gives is what it gives one response at a time: a judge that fails on a sample abstains
(its verdict says so, and the scorer's outcome is unscored, never a success); a scorer or judge that
raises is that response's error (outcome ``error``); :class:`~opct.errors.OpctError` (a judge outage,
bad data) stops the batch and is raised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opct.errors import OpctError
from opct.evals.contract import Judgement, Scorer, Unit
from opct.judges.judge import Verdict, judge_many

#: A response's judgement, or the exception its scorer (or one of its judges) raised.
Scored = Judgement | Exception


@dataclass(frozen=True)
class Ask:
    """One judge call a response needs: ``judge`` asked about ``request`` (with ``meta``) and the response."""

    judge: Any
    request: str
    meta: dict[str, Any]


@dataclass(frozen=True)
class JudgedScorer:
    """A scorer whose judge calls are known from the unit and the response alone (see the module docstring)."""

    asks: Callable[[Unit, str], Sequence[Ask]]
    decide: Callable[[Unit, str, list[Verdict]], Judgement]

    def __call__(self, unit: Unit, response: str) -> Judgement:
        verdicts = [ask.judge.judge(ask.request, response, ask.meta) for ask in self.asks(unit, response)]
        return self.decide(unit, response, verdicts)


def _attempt(call: Callable[[], Any]) -> Any:
    """``call()``, or the exception it raised (an :class:`OpctError` is raised: it stops the eval)."""
    try:
        return call()
    except OpctError:
        raise
    except Exception as exc:
        return exc


def score_batch(scorer: Scorer, items: Sequence[tuple[Unit, str]]) -> list[Scored]:
    """``scorer``'s judgement of every ``(unit, response)``, in order, or the exception that scoring it
    raised; a :class:`JudgedScorer`'s judges are each asked once about the whole batch."""
    if not isinstance(scorer, JudgedScorer) or len(items) == 1:  # one response: the scorer itself, as ever
        return [_attempt(lambda u=unit, t=text: scorer(u, t)) for unit, text in items]
    asks: list[Any] = [_attempt(lambda u=unit, t=text: list(scorer.asks(u, t))) for unit, text in items]
    by_judge: dict[int, tuple[Any, list[tuple[int, int]]]] = {}  # id(judge) -> (judge, [(item, ask)])
    for i, item_asks in enumerate(asks):
        if not isinstance(item_asks, Exception):
            for k, ask in enumerate(item_asks):
                by_judge.setdefault(id(ask.judge), (ask.judge, []))[1].append((i, k))
    verdicts: list[dict[int, Any]] = [{} for _ in items]
    for judge, slots in by_judge.values():
        samples = [(asks[i][k].request, items[i][1], asks[i][k].meta) for i, k in slots]
        got = _attempt(lambda j=judge, s=samples: judge_many(j, s))
        if isinstance(got, Exception):  # a judge's bug: ask one at a time, so the error stays with its sample
            got = [_attempt(lambda j=judge, s=s: j.judge(*s)) for s in samples]
        for (i, k), verdict in zip(slots, got, strict=True):
            verdicts[i][k] = verdict
    out: list[Scored] = []
    for (unit, text), item_asks, got in zip(items, asks, verdicts, strict=True):
        failed = item_asks if isinstance(item_asks, Exception) else next((v for v in got.values() if isinstance(v, Exception)), None)
        if failed is not None:
            out.append(failed)
            continue
        in_order = [got[k] for k in range(len(item_asks))]
        out.append(_attempt(lambda u=unit, t=text, v=in_order: scorer.decide(u, t, v)))
    return out
