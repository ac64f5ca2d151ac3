"""Every number a settings file holds has a declared range, checked when the file is read (issue 73).

A value outside what a run means is refused when the config is read, naming the file, the key, the value and
the allowed range, never accepted and met at step 1 as a loss that blames something else (``lora.alpha: 0``
trains nothing, ``opct.loss.kl_coef: -1`` trains away from the teacher, a ``.nan`` anywhere stops the first
step). The rule has three parts, all here:

* **finite**: every float of every settings section is finite (:data:`RANGE_CONFIG`: ``.nan`` and ``.inf``
  are refused);
* **declared**: every ``int`` or ``float`` field (an element of a list or tuple included) declares its range:
  a bound (``Field(gt=0)``, ``ge``, ``lt``, ``le``), :class:`AnyValue` saying why any value is meant (a
  seed), or :class:`CheckedBy` naming the class's validator that checks and words it. :class:`DeclaredRanges` checks it when a settings class is defined, so a new key cannot ship
  without one; :class:`Why` says why a bound is what it is, and the error quotes it;
* **worded**: :func:`range_text` says the whole allowed range (``greater than 0``, ``in [0, 1)``) and
  :func:`must_be` adds why, which the config error (:func:`opct.config.files._format_validation_error`, at the
  key as written: :func:`field_at`) and ``opct attack``'s options (``first_problem``) use.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any

import annotated_types as at
from pydantic import BaseModel, ConfigDict
from pydantic.fields import FieldInfo

#: The settings every section takes: no NaN or infinity in any float.
RANGE_CONFIG = ConfigDict(allow_inf_nan=False)

#: The error types of a value outside its range (or not finite), which get the allowed range said.
RANGE_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"})


@dataclass(frozen=True)
class AnyValue:
    """A number field's declared range when any value is meant (``Annotated[int, AnyValue("a seed")]``)."""

    why: str


@dataclass(frozen=True)
class CheckedBy:
    """A number field whose range a field validator of its class checks and words itself (a union's, where
    pydantic's own message would list every member): the range in words, and the validator's name, which must be
    one of the class's field validators."""

    range: str
    validator: str


@dataclass(frozen=True)
class Why:
    """Why a number field's bound is what it is; quoted when a value is refused."""

    text: str


_BOUNDS = (at.Gt, at.Ge, at.Lt, at.Le)


def _metadata(items: tuple[Any, ...] | list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        out += list(item.metadata) if isinstance(item, FieldInfo) else [item]
    return out


def _numbers(annotation: Any, metadata: list[Any]) -> list[tuple[type, list[Any]]]:
    """Each ``int``/``float`` a field's type holds, with the metadata that constrains it (``bool`` is no number)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        return _numbers(inner, metadata + _metadata(extra))
    if annotation in (int, float):
        return [(annotation, metadata)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return []  # a section of its own, checked when it is defined
    args = typing.get_args(annotation) if origin is not None else ()
    if origin in (list, tuple, set, frozenset, dict):
        return [found for arg in args if arg is not Ellipsis for found in _numbers(arg, [])]
    return [found for arg in args for found in _numbers(arg, metadata)]  # a union, Optional


def _declared(metadata: list[Any], validators: set[str]) -> bool:
    return any(isinstance(m, (*_BOUNDS, AnyValue)) or (isinstance(m, CheckedBy) and m.validator in validators)
               for m in metadata)


def undeclared_ranges(model: type[BaseModel]) -> list[str]:
    """The number fields of ``model`` (its own, not its sections') that declare no range (or name a
    :class:`CheckedBy` validator the class does not have)."""
    validators = set(model.__pydantic_decorators__.field_validators)
    return [name for name, field in model.model_fields.items()
            if any(not _declared(meta, validators) for _, meta in _numbers(field.annotation, list(field.metadata)))]


class DeclaredRanges(BaseModel):
    """The base of a settings class whose numbers are all finite and all declare their range (the module doc):
    a subclass with a number field of no declared range is a ``TypeError`` when it is defined."""

    model_config = RANGE_CONFIG

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        missing = undeclared_ranges(cls)
        if missing:
            raise TypeError(f"{cls.__module__}.{cls.__qualname__}: {', '.join(missing)} declare no range: give each a "
                            "bound (Field(gt=..., ge=..., lt=..., le=...)) or AnyValue(why) (opct/config/ranges.py)")


def _fmt(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def range_text(metadata: list[Any], kind: type = float) -> str:
    """The allowed range ``metadata`` declares, in words: ``greater than 0``, ``at least 1``, ``in [0, 1)``,
    ``any integer`` (a float is finite besides)."""
    if any(isinstance(m, AnyValue) for m in metadata):
        return "any integer" if kind is int else "any finite number"
    checked = next((m for m in metadata if isinstance(m, CheckedBy)), None)
    if checked is not None:
        return checked.range
    low = next((m for m in metadata if isinstance(m, (at.Gt, at.Ge))), None)
    high = next((m for m in metadata if isinstance(m, (at.Lt, at.Le))), None)
    if low is not None and high is not None:
        left = "(" if isinstance(low, at.Gt) else "["
        right = ")" if isinstance(high, at.Lt) else "]"
        lo, hi = (low.gt if isinstance(low, at.Gt) else low.ge), (high.lt if isinstance(high, at.Lt) else high.le)
        return f"in {left}{_fmt(lo)}, {_fmt(hi)}{right}"
    words = {at.Gt: ("greater than", "gt"), at.Ge: ("at least", "ge"), at.Lt: ("less than", "lt"), at.Le: ("at most", "le")}
    bound = low if low is not None else high
    if bound is None:
        return "a finite number" if kind is float else "an integer"
    word, attr = words[type(bound)]
    return f"{word} {_fmt(getattr(bound, attr))}"


def must_be(field: FieldInfo) -> str:
    """``must be <the allowed range>`` of a number field (its first number's, for a list or tuple), and why
    when the field says; ``""`` for a field of no number."""
    numbers = _numbers(field.annotation, list(field.metadata))
    if not numbers:
        return ""
    kind, metadata = numbers[0]
    allowed = {"any integer": "an integer", "any finite number": "a finite number"}.get(range_text(metadata, kind)) \
        or range_text(metadata, kind)
    why = next((m.text for m in metadata if isinstance(m, Why)), "")
    return f"must be {allowed}" + (f"; {why}" if why else "")


def field_at(model: type[BaseModel], loc: tuple[str, ...],
             sections: dict[str, type[BaseModel]] | None = None) -> tuple[FieldInfo | None, tuple[str, ...]]:
    """The field an error's ``loc`` points at under ``model`` (through sections, unions, list indices and mapping
    keys), and ``loc`` as written: without a discriminated union's tag (``opct.loss.kl_coef``, not
    ``opct.loss.sampled.kl_coef``). ``sections`` are those a top level holds beside its fields (a run's method
    section, by the method's name). The field is ``None`` when the path leads to none."""
    levels: list[type[BaseModel]] = [model]
    found: FieldInfo | None = None
    written: list[str] = []
    for i, part in enumerate(loc):
        tagged = [m for m in levels if "kind" in m.model_fields and part in typing.get_args(m.model_fields["kind"].annotation)]
        fields = [level.model_fields[part] for level in levels if part in level.model_fields]
        if tagged and i < len(loc) - 1:
            levels = tagged
            continue  # the tag pydantic adds (a union member's kind): not written in the file
        if fields:
            found = fields[0]
            levels = _models_in(found.annotation)
        elif i == 0 and sections and part in sections:
            levels, found = [sections[part]], None
        written.append(part)  # else a list index or a mapping key: the same field, or the same sections
    return found, tuple(written)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]
