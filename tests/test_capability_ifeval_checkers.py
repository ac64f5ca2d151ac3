"""opct.ifeval is lm-eval's IFEval checkers: known verdicts, offline loading from the NLTK data opct
ships (never a download), reproducible verdicts, input errors and the extra a missing package names."""

from __future__ import annotations

import fnmatch
import hashlib
import random
import re
import sys
import tomllib
from pathlib import Path

import pytest

from opct.errors import MissingExtraError, describe
from opct.ifeval import InstructionError, evaluate_response, ifeval_metrics, instruction_ids
from opct.ifeval.checkers import NLTK_DATA_DIR, MissingNltkDataError, lm_eval_ifeval, use_shipped_nltk_data

REPO = Path(__file__).resolve().parent.parent
END = "Is there anything else I can help with?"
DE = "Das Wetter ist heute schön und wir gehen mit den Kindern in den Park."

# (instruction id, kwargs, response, expected strict verdict, expected loose verdict)
CASES = [
    # Punkt (the shipped English data) knows "Dr." and "p.m." are abbreviations: 2 sentences, not 4.
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "less than"},
     "Dr. Smith arrived at 5 p.m. yesterday. He left.", True, True),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "at least"},
     "Dr. Smith arrived at 5 p.m. yesterday. He left.", False, False),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "at least"},
     "One thing. Another thing. A third thing.", True, True),
    ("language:response_language", {"language": "de"}, DE, True, True),
    ("language:response_language", {"language": "de"},
     "The weather is nice today and we are going to the park with the children.", False, False),
    ("change_case:english_lowercase", {}, "the weather is nice today and we are going to the park.", True, True),
    ("change_case:english_lowercase", {}, DE.lower(), False, False),  # lower case, but not English
    ("change_case:english_lowercase", {}, "The weather is nice today.", False, False),
    ("startend:end_checker", {"end_phrase": END}, f"Here you go. {END}", True, True),
    ("startend:end_checker", {"end_phrase": END}, f"Here you go. {END}\n(I followed the rules.)", False, True),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* one\n* two", True, True),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* one\n* two\n* three", False, True),
    ("punctuation:no_comma", {}, "No commas here.", True, True),
    ("punctuation:no_comma", {}, "Yes, a comma.", False, False),
    ("punctuation:no_comma", {}, "", False, False),  # an empty answer follows no instruction
    ("detectable_format:title", {}, "<<A Title>>\nThe body.", True, True),
    ("detectable_format:title", {}, "A Title\nThe body.", False, False),
]


@pytest.mark.parametrize(("iid", "kwargs", "response", "strict", "loose"), CASES)
def test_known_verdicts(iid: str, kwargs: dict, response: str, strict: bool, loose: bool) -> None:
    res = evaluate_response([iid], [kwargs], response, item_id="x")
    assert (res.strict, res.loose) == ([strict], [loose])
    assert res.prompt_strict is strict and res.to_dict()["prompt_loose"] is loose


def test_verdicts_are_lm_evals_for_a_prompt_with_several_instructions() -> None:
    ids = ["punctuation:no_comma", "detectable_format:title", "length_constraints:number_sentences",
           "change_case:english_capital"]
    kwargs = [{}, {}, {"num_sentences": 2, "relation": "at least"}, {}]
    response = "Sure, here it is:\n<<Rain>>\nThe rain fell. It fell all night and then it stopped."
    res = evaluate_response(ids, kwargs, response)
    doc = {"key": 1, "prompt": "p", "instruction_id_list": ids, "kwargs": kwargs}
    ref = lm_eval_ifeval().process_results(doc, [response])
    assert (res.strict, res.loose) == (ref["inst_level_strict_acc"], ref["inst_level_loose_acc"])
    assert res.strict == [False, True, True, False] and res.loose == [True, True, True, False]


def test_instruction_ids_are_the_25_of_ifeval() -> None:
    ids = instruction_ids()
    assert len(ids) == 25 and "length_constraints:number_sentences" in ids and "language:response_language" in ids


def test_a_random_draw_of_lm_eval_is_seeded_and_the_callers_random_state_kept() -> None:
    # letter "#" is not a-z: lm-eval's checker draws a random letter instead (IFEval prompts 1122, 1129).
    kwargs = [{"letter": "#", "let_frequency": 4, "let_relation": "at least"}]
    response = "aaaa bbbb cccc dddd eeee ffff gggg hhhh"
    random.seed(7)
    state = random.getstate()
    verdicts = {tuple(evaluate_response(["keywords:letter_frequency"], kwargs, response).strict) for _ in range(20)}
    assert len(verdicts) == 1
    assert random.getstate() == state


def test_bad_instructions_are_input_errors_that_say_what_is_wrong() -> None:
    with pytest.raises(InstructionError, match=r"unknown IFEval instruction id 'format:nonsense'") as info:
        evaluate_response(["format:nonsense"], [{}], "text")
    assert describe(info.value)[0] == 2
    with pytest.raises(InstructionError, match=r"punctuation:no_comma.*do not fit"):
        evaluate_response(["punctuation:no_comma"], [{"num_words": 5}], "text")
    with pytest.raises(ValueError, match="2 instruction ids but 1 kwargs"):
        evaluate_response(["punctuation:no_comma", "detectable_format:title"], [{}], "text")


def test_metrics() -> None:
    ids, kwargs = ["punctuation:no_comma", "detectable_format:title"], [{}, {}]
    results = [evaluate_response(ids, kwargs, r) for r in ("<<T>>\nno comma", "<<T>>\na, b", "a, b")]
    m = ifeval_metrics(results)
    assert m["prompt_level_strict_acc"] == pytest.approx(1 / 3) and m["inst_level_strict_acc"] == pytest.approx(3 / 6)
    assert m["per_instruction"]["detectable_format:title"] == {"n": 3, "strict_acc": 2 / 3, "loose_acc": 2 / 3}
    assert m["n_prompts"] == 3 and m["n_instructions"] == 6 and m["checker"].startswith("lm-eval ")


@pytest.fixture
def fresh_loader():
    lm_eval_ifeval()  # the heavy imports (nltk, lm_eval.tasks) happen once, outside the test
    lm_eval_ifeval.cache_clear()
    yield lm_eval_ifeval
    lm_eval_ifeval.cache_clear()


def test_loading_lm_evals_checkers_never_downloads_nltk_data(monkeypatch, tmp_path, fresh_loader) -> None:
    import nltk

    def no_download(*args, **kwargs):
        raise AssertionError(f"nltk.download{args} was called")

    monkeypatch.setattr(nltk, "download", no_download)
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])  # no NLTK data but what opct ships
    package = sys.modules["lm_eval.tasks.ifeval"]
    for name in [m for m in sys.modules if m.startswith("lm_eval.tasks.ifeval.")]:
        monkeypatch.delitem(sys.modules, name)  # imported afresh: lm-eval's import-time check runs again
        monkeypatch.delattr(package, name.rsplit(".", 1)[1], raising=False)
    utils = fresh_loader()
    assert nltk.data.path[0] == str(NLTK_DATA_DIR)
    util = utils.instructions_registry.instructions.instructions_util
    assert util.count_sentences("Dr. Smith arrived at 5 p.m. yesterday. He left.") == 2


def test_missing_shipped_nltk_data_is_a_fault_not_a_download(monkeypatch, tmp_path) -> None:
    import nltk

    from opct.ifeval import checkers

    monkeypatch.setattr(checkers, "NLTK_DATA_DIR", tmp_path)
    monkeypatch.setattr(nltk.data, "path", [])
    with pytest.raises(MissingNltkDataError, match="Reinstall opct") as info:
        use_shipped_nltk_data(nltk)
    assert describe(info.value)[0] == 1


@pytest.mark.parametrize(("module", "package"), [("lm_eval", "lm-eval"), ("langdetect", "langdetect"),
                                                 ("nltk", "nltk"), ("immutabledict", "immutabledict")])
def test_a_missing_package_names_the_data_extra(monkeypatch, fresh_loader, module: str, package: str) -> None:
    for loaded in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, loaded, None)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError) as info:
        evaluate_response(["punctuation:no_comma"], [{}], "text")
    code, message = describe(info.value)
    assert code == 2 and f"needs the {package} package" in message and "pip install 'opct[data]'" in message


def test_the_shipped_nltk_data_is_what_its_readme_says_and_is_packaged() -> None:
    readme = (NLTK_DATA_DIR / "README.md").read_text(encoding="utf-8")
    listed = dict((path, digest) for digest, path in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, re.M))
    files = sorted(p for p in NLTK_DATA_DIR.rglob("*") if p.is_file())
    data = {p.relative_to(NLTK_DATA_DIR).as_posix(): p for p in files if p.name != "README.md"}
    assert set(listed) == set(data) == {f"tokenizers/punkt_tab/english/{n}" for n in
                                        ("abbrev_types.txt", "collocations.tab", "ortho_context.tab", "sent_starters.txt")}
    for rel, path in data.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == listed[rel], rel
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    for path in files:  # every shipped file is in the wheel
        rel = path.relative_to(NLTK_DATA_DIR.parent).as_posix()
        assert any(fnmatch.fnmatch(rel, pat) for pat in patterns["opct.ifeval"]), rel
