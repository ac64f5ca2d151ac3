"""IFEval on the real 541 prompts: opct's scores are lm-eval's, row for row, and hand-written responses
to 21 real prompts (together covering all 25 instruction ids) get the verdicts a human would give.

opct loads the rows itself (``opct.datasets.load_ifeval``) and scores with ``opct.ifeval``; lm-eval
gets each row as its IFEval task does (the raw ``datasets`` row as ``doc``) and scores with its own
``process_results``. Skipped only when the shared reference data folder is absent.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from opct.datasets import load_ifeval
from opct.ifeval import evaluate_item, ifeval_metrics, instruction_ids, lm_eval_ifeval
from opct.ifeval.scoring import RANDOM_SEED


def _data_dir() -> Path:
    env = os.environ.get("OPCT_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="module")
def folder() -> Path:
    path = _data_dir() / "ifeval"
    if not path.exists():
        pytest.skip(f"shared data folder {path} absent")
    return path


@pytest.fixture(scope="module")
def items_by_key(folder: Path) -> dict:
    return {item.meta["key"]: item for item in load_ifeval(folder)}


@pytest.fixture(scope="module")
def docs_by_key(folder: Path) -> dict:
    """The rows as lm-eval's IFEval task hands them to ``process_results`` (kwargs with ``None`` fields)."""
    import datasets

    return {row["key"]: row for row in datasets.load_from_disk(str(folder))}


def _responses(prompt: str) -> list[str]:
    """Responses built from the prompt that pass some instructions and fail others, strict and loose."""
    first = prompt.split("\n")[0]
    return [
        prompt,
        f"Sure, here it is:\n{prompt.upper()}\nP.S. *I hope this helps*",
        f'"{first.lower()}"\n\n***\n\n* one\n* two\n\n{first.lower()}',
    ]


def test_every_row_scores_exactly_as_lm_eval_process_results(items_by_key: dict, docs_by_key: dict) -> None:
    process_results = lm_eval_ifeval().process_results
    assert len(items_by_key) == 541 and set(items_by_key) == set(docs_by_key)
    ours, theirs = [], []
    for key, item in items_by_key.items():
        for response in _responses(item.user_text):
            res = evaluate_item(item, response)
            ours.append((key, res.prompt_strict, res.strict, res.prompt_loose, res.loose))
            random.seed(RANDOM_SEED)  # lm-eval draws a random letter for prompts 1122 and 1129 (see opct.ifeval.scoring)
            ref = process_results(docs_by_key[key], [response])
            theirs.append((key, ref["prompt_level_strict_acc"], ref["inst_level_strict_acc"],
                           ref["prompt_level_loose_acc"], ref["inst_level_loose_acc"]))
    disagreements = [(o, t) for o, t in zip(ours, theirs, strict=True) if o != t]
    assert not disagreements, disagreements[:5]
    # The comparison is not vacuous: verdicts of both kinds, and loose differing from strict.
    flat_strict = [v for o in ours for v in o[2]]
    flat_loose = [v for o in ours for v in o[4]]
    assert len(flat_strict) == 3 * 834
    assert 0.1 < sum(flat_strict) / len(flat_strict) < 0.9 and sum(flat_loose) > sum(flat_strict)


def _repeat(sentence: str, n: int) -> str:
    return " ".join([sentence] * n)


PROMPT_16 = (
    "Write a story about a man who is trying to get his life together. Put the name of the story in double "
    "angular brackets, i.e. <<story of xyz>>."
)

# key -> (complying response, violating response, expected strict verdicts for the violating one)
REAL_CASES: dict[int, tuple[str, str, list[bool]]] = {
    247: ("Yo, in 1871 the han were gone, prefectures came along.\n******\nMeiji reforms on the beat, "
          "domains to prefectures, the map complete.",
          "One rap only about the prefectures of Japan.", [False]),
    2908: ("SUCCESSFUL PEOPLE ARE DISCIPLINED, CURIOUS AND KIND TO OTHERS.\n\nP.P.S. THEY ALSO REST WELL.",
           "Successful people are disciplined.\n\nP.S. They rest.", [False, False]),
    3453: ("Japan's history spans the *Jomon*, *Yayoi*, *Heian*, *Edo* and *Meiji* periods.",
           "Japan's history spans the *Jomon*, *Heian* and *Edo* periods.", [False]),
    3221: ("DAY 1: [HOTEL] IN LONDON, DINNER AT [RESTAURANT]. DAY 5: [TRAIN] TO PARIS, STAY AT [PARIS HOTEL]. "
           "DAY 10: [FLIGHT] TO ROME, [ROME HOTEL], [MUSEUM], [TRATTORIA].",
           "DAY 1: [HOTEL] IN LONDON. DAY 5: PARIS. DAY 10: ROME AND [MUSEUM].", [False]),
    152: (_repeat("the navigable freeway is a road that people can travel on with ease.", 70),
          "The " + _repeat("navigable freeway is a road that people can travel on with ease.", 80), [False, True]),
    2230: ("The *new app version* lands soon. It brings *weird new features* and a strange interface.",
           "The new app, version two, lands soon.", [False, False]),
    3386: ("Each gallon costs 3 dollars. She can buy 3 gallons and keep a remainder of 1 dollar.",
           "If we divide 10 by 3 the answer is 3 with a remainder of 1.", [False, True]),
    3362: ("Q: Do you want 40 miles per gallon? A: Yes! Q: On the highway? A: Absolutely.",
           "Q: Is the mileage good? A: Yes. Q: Fuel? A: Little. Q: Why? A: Magic. Q: Really? A: Really.",
           [False, False]),
    3429: ("\n".join(f"Section {i}\n" + _repeat("He smiled at her.", 25) for i in range(1, 5)),
           "\n".join(f"Section {i}\n" + _repeat("He smiled at her.", 10) for i in range(1, 4)), [False, False]),
    2997: ("Dear Editor,\n[Your letter here]. Every para of this letter matters.",
           "Dear Editor, pollution is rising and we must act.", [False]),
    16: (PROMPT_16 + "\n\n<<A New Leaf>>\nTom woke up early and made a plan.",
         "Here is a story: Tom woke up early and made a plan.", [False, False]),
    1964: (_repeat("Drags and Races makes cars that race like the wind.", 10),
           "Drags and Races: speed, power, passion.", [False, False]),
    1730: ('"' + "\n".join(f"Section {i}\nText {i}." for i in range(1, 6)) + '"',
           "\n".join(f"Section {i}\nText {i}." for i in range(1, 6)), [False, True]),
    2943: ("vader: you might regret this. i might not.\n***\nme: i might apologize. you might forgive.\n***\n"
           "vader: i might. you might not live.",
           "Vader: You might regret this.\n***\nMe: Sorry.", [False, False, False]),
    1148: ('```json\n{"advantages": ["flight"], "disadvantages": ["fame"]}\n```',
           "Advantages: flight. Disadvantages: fame.", [False]),
    2309: ("Kwa nini Alhamisi ni siku ya amalgamation? Kwa sababu kila mtu anakuja pamoja na marafiki zake.",
           "Why is Thursday the day of amalgamation? Because everyone comes together.", [False]),
    2801: ("* The world is beautiful.\n* The sun is shining.\n* Birds sing and flowers bloom.\n* It is a perfect day.",
           "* The world is beautiful.\n* The sun is shining.\n* It is a perfect day.", [False]),
    227: ("A standard poodle can be taller, but usually not heavier. My answer is maybe.",
          "Maybe, it depends on the poodle.", [False]),
    3414: ("I FROZE when I was JOGGING because the COLD wind was BRUTAL.",
           "I froze when I was jogging.", [False, True]),
    2439: ("Punched by reality the [police] grasp more than offences.\n\nThey also grasp [evidence] and stories."
           "\n\nOffences are only part of it.",
           "Offences, it seems, are not all.\n\nThe police grasp more.", [False, False, False]),
    1893: ("Yo Alexander rose to the throne\nMacedon was his home\nPeace!",
           "Yo Alexander rose to the throne\nPeace! Out.", [False]),
}


def test_real_cases_cover_every_instruction(items_by_key: dict) -> None:
    covered = {iid for key in REAL_CASES for iid in items_by_key[key].meta["instruction_id_list"]}
    assert covered == instruction_ids()


@pytest.mark.parametrize("key", sorted(REAL_CASES))
def test_real_prompt_verdicts(items_by_key: dict, key: int) -> None:
    item = items_by_key[key]
    good, bad, bad_expected = REAL_CASES[key]
    ok = evaluate_item(item, good)
    assert ok.strict == [True] * len(ok.strict), (key, item.meta["instruction_id_list"])
    assert ok.loose == [True] * len(ok.loose)
    ko = evaluate_item(item, bad)
    assert ko.strict == bad_expected, (key, item.meta["instruction_id_list"])
    assert not ko.prompt_strict


def test_metrics_over_all_541_prompts(items_by_key: dict) -> None:
    items = list(items_by_key.values())
    assert {iid for item in items for iid in item.meta["instruction_id_list"]} == instruction_ids()
    echo = ifeval_metrics(evaluate_item(item, item.user_text) for item in items)
    assert echo["n_prompts"] == 541 and echo["n_instructions"] == 834
    assert 0.0 < echo["prompt_level_strict_acc"] <= echo["prompt_level_loose_acc"] < 1.0
    assert echo["inst_level_strict_acc"] <= echo["inst_level_loose_acc"]
    assert sum(v["n"] for v in echo["per_instruction"].values()) == 834
    assert echo["checker"].startswith("lm-eval 0.4.")
    assert ifeval_metrics(evaluate_item(item, "") for item in items)["inst_level_loose_acc"] == 0.0
