"""``eval.limit``: one item limit for every task, or one per eval name."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from opct.evals.config import EvalOptions
from opct.evals.suite import eval_tasks


def _items(options: EvalOptions) -> dict[str, int]:
    return {t.name: len({u.item_id for u in t.units}) for t in eval_tasks(["sycophancy", "jailbreak"], options,
                                                                        suffix_train=False)}


def test_a_limit_per_eval_caps_only_the_eval_it_names() -> None:
    whole = _items(EvalOptions())
    one_limit = _items(EvalOptions(limit=3))
    capped = _items(EvalOptions(limit={"jailbreak": 3}))
    assert one_limit["jailbreak"] < whole["jailbreak"] and one_limit["sycophancy"] < whole["sycophancy"]
    assert capped == {"sycophancy": whole["sycophancy"], "jailbreak": one_limit["jailbreak"]}


@pytest.mark.parametrize(("limit", "said"), [
    ({"jailbrek": 3}, "limit names unknown eval(s) jailbrek; known:"),
    ({"jailbreak": 0}, "limit.jailbreak must be a positive number of items, got 0"),
    (-2, "limit must be a positive number of items, got -2"),
])
def test_a_bad_limit_is_named(limit: object, said: str) -> None:
    with pytest.raises(ValidationError, match=said.replace("(", r"\(").replace(")", r"\)")):
        EvalOptions(limit=limit)
