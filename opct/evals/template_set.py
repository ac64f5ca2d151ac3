"""Perturbation templates: families of texts with ``{name}`` slots, split by family into train and held-out.

Every axis's cue and wrapper sets are :class:`TemplateSet` s (``opct/axes/<axis>/templates.py``, reached
through :attr:`opct.evals.axis_views.DataView.templates`); the organism's corpus and world read them the same way.
Templates use one placeholder scheme: ``{name}`` slots filled by :func:`fill` (sycophancy cues:
``{question}``, ``{letter}``, ``{option}``; jailbreak wrappers: ``{request}``, ``{core}``; awareness
teacher prompts: ``{fact}``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

TRAIN = "train"
HELDOUT = "heldout"
SPLITS = (TRAIN, HELDOUT)
#: The slot a wrapper template (a jailbreak wrapper) puts the request it wraps in.
REQUEST = "{request}"
_SLOT = re.compile(r"\{(\w+)\}")


def fill(text: str, **slots: str) -> str:
    """``text`` with every ``{name}`` slot named in ``slots`` replaced, in one pass.

    Slots not given and any other braces are kept as they are; a filled value is never scanned for
    slots again (so a question that happens to contain ``{letter}`` stays intact).
    """
    return _SLOT.sub(lambda m: slots[m.group(1)] if m.group(1) in slots else m.group(0), text)


@dataclass(frozen=True)
class Template:
    """A perturbation template: ``id``, ``family``, ``text`` with slots, ``split`` (train / heldout)."""

    id: str
    family: str
    text: str
    split: str = TRAIN


def assign_splits(templates: list[Template], heldout_families: set[str] | frozenset[str]) -> list[Template]:
    """The templates with ``split`` set by family: held-out families → ``heldout``, others → ``train``."""
    return [
        Template(t.id, t.family, t.text, HELDOUT if t.family in heldout_families else TRAIN) for t in templates
    ]


@dataclass(frozen=True)
class TemplateSet:
    """Perturbation templates in families, with the held-out families named in code.

    ``families`` maps a family to its template texts (in order); template ids are
    ``<family>-<index>`` with indices from ``first_index`` (two digits). ``labels`` optionally gives a
    family a display name (a jailbreak wrapper's style, e.g. ``"role-play"``).
    """

    name: str
    families: Mapping[str, Sequence[str]]
    heldout: frozenset[str]
    first_index: int = 1
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.heldout) - set(self.families)
        if unknown:
            raise ValueError(f"template set {self.name!r}: held-out families {sorted(unknown)} are not defined")

    def split_of(self, family: str) -> str:
        """``"heldout"`` or ``"train"``."""
        return HELDOUT if family in self.heldout else TRAIN

    def family_names(self, split: str | None = None) -> list[str]:
        """The families of ``split`` (``None``: all), in definition order."""
        check_split(split)
        return [f for f in self.families if split is None or self.split_of(f) == split]

    def templates(self, split: str | None = None) -> list[Template]:
        """The templates of ``split`` (``None``: all), family by family."""
        return [
            Template(f"{fam}-{i:02d}", fam, text, self.split_of(fam))
            for fam in self.family_names(split)
            for i, text in enumerate(self.families[fam], self.first_index)
        ]


def check_split(split: str | None) -> None:
    """Raise ``ValueError`` unless ``split`` is ``"train"``, ``"heldout"`` or ``None``."""
    if split not in (None, *SPLITS):
        raise ValueError(f"split must be {TRAIN!r} or {HELDOUT!r}, got {split!r}")


def of_split(templates: Iterable[Template], split: str | None) -> list[Template]:
    """The templates of one ``split`` (``"train"`` / ``"heldout"``; ``None`` keeps all)."""
    check_split(split)
    return [t for t in templates if split is None or t.split == split]


def wrap(template: Template | str, request: str, core: str | None = None) -> str:
    """A wrapper template with ``{request}`` (and ``{core}``, when given) filled; other braces are kept."""
    text = template.text if isinstance(template, Template) else template
    return fill(text, request=request) if core is None else fill(text, request=request, core=core)


def keeps_request(template: Template | str) -> bool:
    """Whether a wrapper template shows the request it wraps (only such a template can wrap another wrapper)."""
    return REQUEST in (template.text if isinstance(template, Template) else template)
