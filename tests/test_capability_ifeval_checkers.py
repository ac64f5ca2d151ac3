"""Every IFEval checker on hand-written passing and failing responses, plus loose mode and metrics."""

from __future__ import annotations

import json

import pytest

from opct.ifeval import (
    INSTRUCTIONS,
    InstructionError,
    check_instruction,
    detect_language,
    evaluate_response,
    ifeval_metrics,
    loose_variants,
)
from opct.ifeval.language import detect_language_builtin
from opct.ifeval.text import count_words, split_paragraphs, split_sentences

LOREM = "The river bends near the old mill. Children play on its banks every summer."

# instruction id -> list of (kwargs, passing responses, failing responses)
CASES: dict[str, list[tuple[dict, list[str], list[str]]]] = {
    "change_case:capital_word_frequency": [
        ({"capital_frequency": 2, "capital_relation": "at least"},
         ["NASA and the ESA launched it.", "I think USA-BASED firms won."],
         ["Nasa and Esa launched it.", "Only NASA did."]),
        ({"capital_frequency": 3, "capital_relation": "less than"},
         ["Only NASA and ESA.", "no capitals here"],
         ["NASA, ESA and JAXA cooperate.", "I AM VERY LOUD"]),
    ],
    "change_case:english_capital": [
        ({}, ["THE RIVER BENDS NEAR THE OLD MILL AND THE CHILDREN PLAY THERE."],
         ["The river bends near the old mill.", "DAS WETTER IST HEUTE SCHÖN UND WIR GEHEN IN DEN PARK."]),
    ],
    "change_case:english_lowercase": [
        ({}, ["the river bends near the old mill and the children play there."],
         ["The river bends near the old mill.", "il tempo è bello oggi e andiamo al parco con i bambini."]),
    ],
    "combination:repeat_prompt": [
        ({"prompt_to_repeat": "Write a haiku about rain."},
         ["Write a haiku about rain. Drops on a tin roof...", "write a haiku about rain.\nsoft rain"],
         ["Here is a haiku about rain: drops...", "Drops on a tin roof. Write a haiku about rain."]),
    ],
    "combination:two_responses": [
        ({}, ["Answer one.\n******\nAnswer two.", "******\nFirst.\n******\nSecond.\n******"],
         ["Only one answer.", "Same.\n******\nSame.", "One.\n******\n\n******\nTwo.", "A\n******\nB\n******\nC"]),
    ],
    "detectable_content:number_placeholders": [
        ({"num_placeholders": 2}, ["Dear [name], meet me at [address].", "[a] [b] [c]"],
         ["Dear [name], meet me soon.", "No placeholders."]),
    ],
    "detectable_content:postscript": [
        ({"postscript_marker": "P.S."}, ["Body text.\n\nP.S. Bring snacks.", "Body.\n**P.S.** see you", "Body\np. s. later"],
         ["Body text without a postscript.", "Body text. PS bring snacks."]),
        ({"postscript_marker": "P.P.S"}, ["Body.\nP.S. one\nP.P.S two", "Body\nP.P.S. two"],
         ["Body.\nP.S. only one postscript"]),
    ],
    "detectable_format:constrained_response": [
        ({}, ["My answer is yes.", "After thinking: My answer is maybe."],
         ["Yes.", "My answer is yes", "my answer is no."]),
    ],
    "detectable_format:json_format": [
        ({}, ['{"a": 1, "b": [1, 2]}', '```json\n{"a": 1}\n```', "```\n[1, 2, 3]\n```"],
         ['Here is the JSON: {"a": 1}', "{'a': 1}", '```json\n{"a": 1,}\n```']),
    ],
    "detectable_format:multiple_sections": [
        ({"section_spliter": "SECTION", "num_sections": 2}, ["SECTION 1\nIntro.\nSECTION 2\nBody."],
         ["SECTION 1\nIntro only.", "Section 1\nIntro.\nSection 2\nBody."]),
        ({"section_spliter": "Day", "num_sections": 3}, ["Day 1: walk\nDay 2: swim\nDay 3: rest"],
         ["Day 1: walk\nDay 2: swim", "Monday 1 Tuesday 2 Sunday 3"]),
    ],
    "detectable_format:number_bullet_lists": [
        ({"num_bullets": 3}, ["* one\n* two\n* three", "Intro:\n- one\n- two\n  - nested three\nDone."],
         ["* one\n* two", "* one\n* two\n* three\n* four", "1. one\n2. two\n3. three",
          "**Bold** line\n* one\n* two\n---"]),
    ],
    "detectable_format:number_highlighted_sections": [
        ({"num_highlights": 2}, ["Some *first part* and *second part*.", "**bold one** and *italic two*"],
         ["Only *one* highlight.", "Only *one* highlight and ** empty.", "Bold-less ** ** text"]),
    ],
    "detectable_format:title": [
        ({}, ["<<The River>>\nIt bends.", "A poem <<of joy>> here"], ["The River\nIt bends.", "<< >> empty", "<<\n>>"]),
    ],
    "keywords:existence": [
        ({"keywords": ["river", "mill"]}, [LOREM, "RIVER MILL"], ["The river bends.", "Nothing here."]),
    ],
    "keywords:forbidden_words": [
        ({"forbidden_words": ["rock", "stone"]}, ["Rocking chairs and stones are fine.", "A quiet pond."],
         ["A Rock fell.", "stone, by stone"]),
    ],
    "keywords:frequency": [
        ({"keyword": "river", "frequency": 2, "relation": "at least"}, ["river, River!", "The river and the rivers."],
         ["One river only.", "No water here."]),
        ({"keyword": "fake", "frequency": 2, "relation": "less than"}, ["It is fake.", "All real."],
         ["Fake news is fake."]),
    ],
    "keywords:letter_frequency": [
        ({"letter": "q", "let_frequency": 2, "let_relation": "at least"}, ["Quick queen", "qQ"], ["Quick king"]),
        ({"letter": "#", "let_frequency": 1, "let_relation": "less than"}, ["no hashes"], ["#tag"]),
    ],
    "language:response_language": [
        ({"language": "de"}, ["Das Wetter ist heute schön und wir gehen mit den Kindern in den Park."],
         [LOREM, "Il tempo è bello oggi e andiamo al parco con i bambini."]),
        ({"language": "hi"}, ["आज मौसम अच्छा है और हम बच्चों के साथ पार्क जा रहे हैं।"],
         ["आज हवामान छान आहे आणि आम्ही मुलांसोबत उद्यानात जात आहोत.", LOREM]),
        ({"language": "ko"}, ["오늘 날씨가 좋아서 우리는 아이들과 함께 공원에 갑니다."], ["今日はいい天気ですね。"]),
    ],
    "length_constraints:nth_paragraph_first_word": [
        ({"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "summary"},
         ["Intro.\n\nSummary: it works.\n\nEnd.", "Intro.\n\n\"Summary\" first.\n\nEnd.", "A\n\n**Summary** x\n\nC"],
         ["Intro.\n\nIn summary: it works.\n\nEnd.", "Intro.\n\nSummary: x", "Intro.\nSummary: x\nEnd."]),
    ],
    "length_constraints:number_paragraphs": [
        ({"num_paragraphs": 3}, ["One.\n***\nTwo.\n***\nThree.", "One.\n\n***\n\nTwo\n***\nThree\n***"],
         ["One.\n***\nTwo.", "One.\n***\n***\nTwo.\n***\nThree.", "One.\n\nTwo.\n\nThree."]),
    ],
    "length_constraints:number_sentences": [
        ({"num_sentences": 3, "relation": "less than"}, ["One. Two!", "Mr. Smith went to Washington. He won."],
         ["One. Two. Three.", "Is it? Yes! Really."]),
        ({"num_sentences": 3, "relation": "at least"}, ["One. Two. Three.", "Why? Because. Done!"], ["Dr. Who. Ok."]),
    ],
    "length_constraints:number_words": [
        ({"num_words": 5, "relation": "at least"}, ["one two three four five", "It's a well-known fact."],
         ["one two three four"]),
        ({"num_words": 5, "relation": "less than"}, ["one two three four"], ["one two three four five"]),
    ],
    "punctuation:no_comma": [
        ({}, [LOREM, "No commas here; none at all."], ["One, two.", "全角，逗号"]),
    ],
    "startend:end_checker": [
        ({"end_phrase": "Is there anything else I can help with?"},
         ["Done. Is there anything else I can help with?", "Done. is there anything else i can help with?  \n"],
         ["Is there anything else I can help with? Bye.", "Done. Is there anything else I can help with"]),
    ],
    "startend:quotation": [
        ({}, ['"The whole answer."', '  "Multi\nline"  ', "“Curly quotes”"], ["The whole answer.", '"Half quoted', '"']),
    ],
}


def test_every_registered_instruction_has_cases() -> None:
    assert set(CASES) == set(INSTRUCTIONS)
    assert len(INSTRUCTIONS) == 25


@pytest.mark.parametrize(
    ("iid", "kwargs", "response"),
    [(iid, kw, r) for iid, cases in CASES.items() for kw, good, _ in cases for r in good],
)
def test_checker_passes(iid: str, kwargs: dict, response: str) -> None:
    assert check_instruction(iid, response, kwargs, detector="builtin") is True


@pytest.mark.parametrize(
    ("iid", "kwargs", "response"),
    [(iid, kw, r) for iid, cases in CASES.items() for kw, _, bad in cases for r in bad],
)
def test_checker_fails(iid: str, kwargs: dict, response: str) -> None:
    assert check_instruction(iid, response, kwargs, detector="builtin") is False


def test_check_instruction_errors() -> None:
    with pytest.raises(InstructionError, match="unknown"):
        check_instruction("keywords:nonexistent", "x", {})
    with pytest.raises(InstructionError, match="missing kwargs"):
        check_instruction("keywords:frequency", "x", {"keyword": "a"})
    with pytest.raises(InstructionError, match="relation"):
        check_instruction("keywords:frequency", "x", {"keyword": "a", "frequency": 1, "relation": "about"})
    # None-valued and extra kwargs (HF struct rows carry every field) are ignored
    assert check_instruction("punctuation:no_comma", "x", {"num_words": None, "keyword": None})


# ---------------------------------------------------------------- strict vs loose


def test_loose_variants() -> None:
    variants = loose_variants("Sure!\n*body*\nHope this helps")
    assert variants[:4] == ["Sure!\n*body*\nHope this helps", "*body*\nHope this helps", "Sure!\n*body*", "*body*"]
    assert variants[7] == "body"
    assert len(variants) == 8


def test_loose_rescues_preamble_and_markdown() -> None:
    # Strict fails because of the chatty first line; loose strips it.
    r = evaluate_response(["startend:quotation"], [{}], 'Sure, here it is:\n"The answer."')
    assert r.strict == [False] and r.loose == [True]
    # Markdown asterisks break "ends with"; loose removes them.
    r = evaluate_response(["startend:end_checker"], [{"end_phrase": "Peace!"}], "Bye. **Peace!**")
    assert r.strict == [False] and r.loose == [True]
    # Loose does not rescue a genuine violation.
    r = evaluate_response(["punctuation:no_comma"], [{}], "a, b\nc, d\ne, f")
    assert r.strict == [False] and r.loose == [False]


def test_empty_response_fails_everything() -> None:
    r = evaluate_response(["punctuation:no_comma", "keywords:forbidden_words"], [{}, {"forbidden_words": ["x"]}], "  ")
    assert r.strict == [False, False] and r.loose == [False, False]
    assert evaluate_response(["punctuation:no_comma"], [{}], None).strict == [False]


def test_loose_checks_each_instruction_on_its_own_variant() -> None:
    # no_comma holds once the quoted last line is dropped, quotation once the first line is dropped.
    r = evaluate_response(["punctuation:no_comma", "startend:quotation"], [{}, {}], 'Sure:\n"a, b"')
    assert r.strict == [False, False] and r.loose == [True, True]


def test_metrics() -> None:
    results = [
        evaluate_response(["punctuation:no_comma", "startend:quotation"], [{}, {}], '"no comma"', item_id="a"),
        evaluate_response(["punctuation:no_comma", "startend:quotation"], [{}, {}], "Sure, here:\n\"a, b\"", item_id="b"),
        evaluate_response(["detectable_format:title"], [{}], "<<T>> body", item_id="c"),
        evaluate_response(["detectable_format:title"], [{}], "no title", item_id="d"),
    ]
    m = ifeval_metrics(results, detector="builtin")
    assert m["n_prompts"] == 4 and m["n_instructions"] == 6
    assert m["prompt_level_strict_acc"] == pytest.approx(2 / 4)
    assert m["prompt_level_loose_acc"] == pytest.approx(2 / 4)
    assert m["inst_level_strict_acc"] == pytest.approx(3 / 6)
    assert m["inst_level_loose_acc"] == pytest.approx(4 / 6)
    assert m["per_instruction"]["detectable_format:title"] == {"n": 2, "strict_acc": 0.5, "loose_acc": 0.5}
    assert m["language_detector"] == "builtin"
    json.dumps([r.to_dict() for r in results])
    assert results[0].to_dict()["prompt_strict"] is True


# ---------------------------------------------------------------- text utilities and language


def test_sentence_splitter() -> None:
    assert split_sentences("Hello world. This is Mr. Smith. Did he? Yes!") == [
        "Hello world.", "This is Mr. Smith.", "Did he?", "Yes!"]
    assert len(split_sentences("I paid approx. five dollars. J. K. Rowling wrote it.")) == 2
    assert len(split_sentences("It was in 2020. Then came 2021. Pi is 3.14.")) == 3
    assert len(split_sentences("1. First item\n2. Second item.")) == 1
    assert split_sentences("") == []
    assert split_sentences("no final punctuation") == ["no final punctuation"]
    assert len(split_sentences('He said "Stop." Then he left.')) == 2


def test_words_and_paragraphs() -> None:
    assert count_words("It's a well-known fact, 100%.") == 7
    assert split_paragraphs("a\n\nb\n \n c\n\n\n") == ["a", "b", "c"]


LANG_SAMPLES = {
    "en": "The weather is nice today and we are going to the park with the children.",
    "de": "Das Wetter ist heute schön und wir gehen mit den Kindern in den Park.",
    "pt": "O tempo está bom hoje e nós vamos ao parque com as crianças.",
    "it": "Il tempo è bello oggi e andiamo al parco con i bambini.",
    "fi": "Sää on tänään kaunis ja me menemme puistoon lasten kanssa.",
    "sw": "Hali ya hewa ni nzuri leo na tunaenda kwenye bustani pamoja na watoto.",
    "vi": "Hôm nay thời tiết đẹp và chúng tôi sẽ đi công viên với những đứa trẻ.",
    "ru": "Сегодня хорошая погода, и мы идём в парк с детьми. Это было бы здорово.",
    "bg": "Времето днес е хубаво и ние отиваме в парка с децата. Това е чудесно.",
    "ar": "الطقس جميل اليوم ونحن ذاهبون إلى الحديقة مع الأطفال في هذا الصباح.",
    "fa": "هوا امروز خوب است و ما با بچه ها به پارک می رویم.",
    "ur": "آج موسم اچھا ہے اور ہم بچوں کے ساتھ پارک جا رہے ہیں۔",
    "hi": "आज मौसम अच्छा है और हम बच्चों के साथ पार्क जा रहे हैं।",
    "mr": "आज हवामान छान आहे आणि आम्ही मुलांसोबत उद्यानात जात आहोत.",
    "ne": "आज मौसम राम्रो छ र हामी बच्चाहरूसँग पार्कमा जाँदैछौं।",
    "bn": "আজ আবহাওয়া ভালো এবং আমরা বাচ্চাদের সাথে পার্কে যাচ্ছি।",
    "gu": "આજે હવામાન સારું છે અને અમે બાળકો સાથે પાર્કમાં જઈ રહ્યા છીએ.",
    "pa": "ਅੱਜ ਮੌਸਮ ਵਧੀਆ ਹੈ ਅਤੇ ਅਸੀਂ ਬੱਚਿਆਂ ਨਾਲ ਪਾਰਕ ਜਾ ਰਹੇ ਹਾਂ।",
    "ta": "இன்று வானிலை நன்றாக உள்ளது, நாங்கள் குழந்தைகளுடன் பூங்காவிற்கு செல்கிறோம்.",
    "te": "ఈ రోజు వాతావరణం బాగుంది మరియు మేము పిల్లలతో పార్కుకు వెళ్తున్నాము.",
    "kn": "ಇಂದು ಹವಾಮಾನ ಚೆನ್ನಾಗಿದೆ ಮತ್ತು ನಾವು ಮಕ್ಕಳೊಂದಿಗೆ ಉದ್ಯಾನವನಕ್ಕೆ ಹೋಗುತ್ತಿದ್ದೇವೆ.",
    "ko": "오늘 날씨가 좋아서 우리는 아이들과 함께 공원에 갑니다.",
    "th": "วันนี้อากาศดีและเรากำลังจะไปสวนสาธารณะกับเด็กๆ",
}


@pytest.mark.parametrize(("code", "text"), list(LANG_SAMPLES.items()))
def test_builtin_language_detection(code: str, text: str) -> None:
    """Every language that IFEval's response_language prompts ask for, plus English."""
    assert detect_language_builtin(text.lower()) == code
    assert detect_language(text.upper(), "builtin") == code  # all-caps input is lower-cased first


def test_language_undetectable() -> None:
    assert detect_language("12345 !!!", "builtin") is None
    assert check_instruction("language:response_language", "12345", {"language": "de"}, detector="builtin")


@pytest.mark.parametrize(("code", "text"), [(c, LANG_SAMPLES[c]) for c in ("en", "de", "ru", "ko", "ar")])
def test_langdetect_backend_when_installed(code: str, text: str) -> None:
    pytest.importorskip("langdetect")
    assert detect_language(text, "langdetect") == code


@pytest.mark.parametrize("text", ["." * 20000 + "x", "x" * 20000 + ".", "e.g. " * 5000, "\n" * 20000, " *" * 10000])
def test_checkers_stay_fast_on_degenerate_output(text: str) -> None:
    import time

    start = time.perf_counter()
    split_sentences(text)
    for iid in ("length_constraints:number_sentences", "detectable_content:postscript",
                "detectable_format:number_highlighted_sections"):
        kwargs = {"num_sentences": 3, "relation": "at least", "postscript_marker": "P.S.", "num_highlights": 2}
        evaluate_response([iid], [kwargs], text)
    assert time.perf_counter() - start < 2.0
