"""Offline response-language detection for IFEval (``language:response_language``, ``change_case:*``).

Two back-ends:

* ``"langdetect"``: the PyPI ``langdetect`` package (profiles ship in the wheel, no download), which
  the reference IFEval scorer uses. Seeded for determinism.
* ``"builtin"``: a small heuristic written here: the dominant Unicode script decides the language
  where a script belongs to one language (Hangul -> ko, Thai -> th, Kannada -> kn, ...); within
  shared scripts (Latin, Cyrillic, Arabic, Devanagari) language-specific letters and frequent
  function words decide. It covers every language in the IFEval prompts (en, de, pt, it, fi, sw, vi,
  ru, bg, ar, fa, ur, hi, mr, ne, bn, gu, pa, ta, te, kn, ko, th) and several more.

:func:`detect_language` uses ``"auto"`` by default: langdetect when installed, else builtin.
:func:`active_detector` names the back-end that ``"auto"`` resolves to, so results can record it.
Codes are ISO 639-1 (``zh-cn``/``zh-tw`` from langdetect are reduced to ``zh``).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

__all__ = ["active_detector", "detect_language", "detect_language_builtin"]

# Scripts that (for our purposes) identify one language; ranges are inclusive code points.
_SINGLE_SCRIPT = (
    (0xAC00, 0xD7AF, "ko"), (0x1100, 0x11FF, "ko"), (0x3130, 0x318F, "ko"),
    (0x3040, 0x30FF, "ja"), (0x0E00, 0x0E7F, "th"), (0x0980, 0x09FF, "bn"), (0x0A00, 0x0A7F, "pa"),
    (0x0A80, 0x0AFF, "gu"), (0x0B00, 0x0B7F, "or"), (0x0B80, 0x0BFF, "ta"), (0x0C00, 0x0C7F, "te"),
    (0x0C80, 0x0CFF, "kn"), (0x0D00, 0x0D7F, "ml"), (0x0D80, 0x0DFF, "si"), (0x0370, 0x03FF, "el"),
    (0x0590, 0x05FF, "he"), (0x0530, 0x058F, "hy"), (0x10A0, 0x10FF, "ka"), (0x0E80, 0x0EFF, "lo"),
    (0x1780, 0x17FF, "km"), (0x1000, 0x109F, "my"), (0x1200, 0x137F, "am"),
)
_SHARED_SCRIPT = (
    (0x0900, 0x097F, "devanagari"), (0x0600, 0x06FF, "arabic"), (0x0750, 0x077F, "arabic"),
    (0xFB50, 0xFDFF, "arabic"), (0xFE70, 0xFEFF, "arabic"), (0x0400, 0x04FF, "cyrillic"),
    (0x4E00, 0x9FFF, "han"),
)

_STOPWORDS: dict[str, dict[str, str]] = {
    "latin": {
        "en": "the and is are of to in that it for with as was on this be you not have but they by from or we",
        "de": "der die das und ist nicht ein eine ich sie es zu mit den von dem auf für sich auch wir dass wie",
        "fr": "le la les et est un une des du de que pas pour dans ce qui sur avec sont il elle nous vous",
        "es": "el la los las y es un una que de en por para con no se del al lo como más pero sus",
        "pt": "o a os as e é um uma que de do da dos das em no na não para com por se mais como ao",
        "it": "il lo la gli le e è un una che di del della in non per con si sono al ma anche come",
        "nl": "de het een en is van dat niet in op te zijn voor met die ik je ook maar aan",
        "fi": "ja on ei se että oli ovat kun mutta myös tai hän ne niin kuin ole olla mitä sen joka",
        "sv": "och är att en ett det som inte på för med jag har av till den de om men",
        "sw": "na ya wa kwa ni za la katika kuwa hii huo cha vya kama lakini pia sana wako yako hiyo",
        "vi": "và của là có không được những các cho một người trong này với để đã khi thì cũng như",
        "id": "dan yang di ini itu dengan untuk tidak dari dalam akan pada juga ada saya adalah",
        "tr": "ve bir bu da de için ile çok ne var olarak daha gibi ama değil",
        "pl": "i w nie na się z to że do jest jak ale o co tak po od",
    },
    "cyrillic": {
        "ru": "и в не на что с это как по он я то но из для к а его так все был она они мы вы",
        "bg": "и в на е се за от да не с са това че по като но които който ще си му са съм",
        "uk": "і в не на що з це як по він я та але із для до а його так всі був вона вони ми ви",
    },
    "arabic": {
        "ar": "في من على إلى أن عن التي الذي هذا هذه مع كان ما لا هو هي ذلك قد كل بين",
        "fa": "و در به از که این را با های برای است می آن یک تا بر شود خود هم",
        "ur": "ہے کے میں کی اور کا سے کو یہ ہیں نے پر بھی تھا ایک لیے کہ جو",
    },
    "devanagari": {
        "hi": "है हैं के का की में और से को यह पर भी था थे नहीं एक लिए तो हो कि जो कर रहा गया",
        "mr": "आहे आणि हे या च्या ची चा चे ला ने मध्ये आहेत नाही होते केले तर पण एक की त्या हा",
        "ne": "छ हो र को मा ले गर्न पनि यो छन् थियो हुन्छ भने तथा लागि गरेको यस गर्ने छैन",
    },
}
# Short words common in English text; dropped from the other Latin profiles so that English prose
# ("a", "in", "on", "do") is not read as Portuguese or Finnish.
_ENGLISH_COMMON = frozenset(_STOPWORDS["latin"]["en"].split()) | {
    "a", "an", "as", "at", "do", "no", "so", "in", "on", "is", "it", "me", "he", "we", "be", "by", "or",
    "of", "to", "all", "come", "man", "will", "die", "con", "art",
}
_STOPSETS = {
    script: {
        lang: frozenset(w for w in words.split() if script != "latin" or lang == "en" or w not in _ENGLISH_COMMON)
        for lang, words in langs.items()
    }
    for script, langs in _STOPWORDS.items()
}
_LETTER_HINTS = {
    "cyrillic": {"ru": "ыэё", "uk": "іїєґ", "bg": ""},
    "arabic": {"ur": "ےںٹڈڑھۓ", "fa": "پچژگیک", "ar": "ةيكإأ"},
    "latin": {"vi": "ơưăđạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ", "de": "äöüß", "fi": "äö",
              "pt": "ãõç", "es": "ñ¿¡", "fr": "çœ", "pl": "ąęłńśźż", "tr": "ğış"},
}


_WORD_SPLIT = re.compile(r"[\s\d.,;:!?।॥؟،۔\"'()\[\]{}<>«»“”‘’…—–*#/\\-]+")


def _script_of(ch: str) -> str | None:
    cp = ord(ch)
    if ch.isascii():
        return "latin" if ch.isalpha() else None
    for lo, hi, lang in _SINGLE_SCRIPT:
        if lo <= cp <= hi:
            return "=" + lang
    for lo, hi, name in _SHARED_SCRIPT:
        if lo <= cp <= hi:
            return name
    if (ch.isalpha() and cp < 0x0250) or 0x1E00 <= cp <= 0x1EFF:
        return "latin"
    return None


def detect_language_builtin(text: str) -> str | None:
    """Heuristic offline language identification (see module docstring); None if no letters."""
    scripts = Counter(s for s in map(_script_of, text) if s)
    if not scripts:
        return None
    script = scripts.most_common(1)[0][0]
    if script.startswith("="):
        # Kana beats Han for Japanese; Han alone handled below.
        return script[1:]
    if script == "han":
        return "ja" if scripts.get("=ja") else "zh"
    lowered = text.lower()
    # Split on spaces/punctuation, not on \W: Indic vowel signs are combining marks, not "word" chars.
    words = [w for w in _WORD_SPLIT.split(lowered) if w]
    scores: Counter[str] = Counter()
    for lang, stops in _STOPSETS[script].items():
        scores[lang] = sum(1 for w in words if w in stops)
    for lang, letters in _LETTER_HINTS.get(script, {}).items():
        if letters:
            scores[lang] += 0.5 * sum(lowered.count(c) for c in letters)
    if script == "cyrillic" and re.search(r"[^\W\d_]ъ[^\W\d_]", lowered):
        scores["bg"] += 1.0  # word-internal hard sign is typical of Bulgarian
    best, top = scores.most_common(1)[0] if scores else ("", 0)
    if top <= 0:
        defaults = {"latin": "en", "cyrillic": "ru", "arabic": "ar", "devanagari": "hi"}
        return defaults[script] if script != "latin" or text.isascii() else None
    return best


@lru_cache(maxsize=1)
def _langdetect():  # pragma: no cover - depends on the optional package
    try:
        from langdetect import DetectorFactory, detect
    except ImportError:
        return None
    DetectorFactory.seed = 0
    return detect


def active_detector(backend: str = "auto") -> str:
    """The back-end ``backend`` resolves to: ``"langdetect"`` or ``"builtin"``."""
    if backend == "auto":
        return "langdetect" if _langdetect() is not None else "builtin"
    if backend not in ("langdetect", "builtin"):
        raise ValueError(f"unknown language detector {backend!r}; use auto, langdetect or builtin")
    if backend == "langdetect" and _langdetect() is None:
        raise ImportError("language detector 'langdetect' requested but the package is not installed: "
                          "pip install 'opct[data]' (or choose the builtin detector)")
    return backend


def detect_language(text: str, backend: str = "auto") -> str | None:
    """ISO 639-1 code of the text's language, or None when it cannot be determined (e.g. no letters).

    Text is lower-cased first (all-caps text confuses both back-ends).
    """
    backend = active_detector(backend)
    lowered = text.lower()
    if backend == "builtin":
        return detect_language_builtin(lowered)
    detect = _langdetect()
    try:
        code = detect(lowered)
    except Exception:  # langdetect raises LangDetectException on text without features
        return None
    return code.split("-")[0]
