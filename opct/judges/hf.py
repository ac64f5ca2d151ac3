"""The rubric judge run on a local Hugging Face chat model (``transformers`` generate).

The model is loaded from a local path or a hub id the user gives (no ``trust_remote_code`` unless
asked), decoded greedily by default, and its output parsed by the rubric exactly as for the HTTP
judge. Loading is lazy, so building the judge is cheap.
"""

from __future__ import annotations

import os
from typing import Any

from opct.config.hub import require_hub
from opct.judges.model_judge import JudgeUnavailable, RubricJudge
from opct.judges.rubrics import Messages, Rubric


class HFJudge(RubricJudge):
    """Rubric judge on a local ``transformers`` causal LM with a chat template.

    Args:
        rubric: the rubric (see :func:`opct.judges.rubrics.get_rubric`).
        model_path: local folder (or a hub id the user chose) of a chat model.
        cache_dir: disk cache folder (``None`` disables caching).
        max_new_tokens: generation budget; do_sample/temperature: decoding (greedy by default).
        device: e.g. ``"cpu"``, ``"cuda"``; default CUDA when available.
        dtype: torch dtype name for loading (``"auto"`` by default).
        model, tokenizer: already-loaded objects (skip loading; ``model_path`` is then only a label).
        trust_remote_code: passed to ``from_pretrained`` (off by default).
    """

    kind = "hf"
    code_version = "2"  # 2: empty responses abstain; only parsed completions are cached

    def __init__(
        self,
        rubric: Rubric,
        model_path: str | os.PathLike[str],
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        max_new_tokens: int = 512,
        do_sample: bool = False,
        temperature: float = 1.0,
        device: str | None = None,
        dtype: str = "auto",
        model: Any = None,
        tokenizer: Any = None,
        trust_remote_code: bool = False,
    ) -> None:
        super().__init__(rubric, str(model_path), cache_dir=cache_dir)
        self.model_path = str(model_path)
        self.max_new_tokens = max_new_tokens
        self.do_sample = do_sample
        self.temperature = temperature
        self.device = device
        self.dtype = dtype
        self.trust_remote_code = trust_remote_code
        self._model = model
        self._tokenizer = tokenizer

    def decoding(self) -> dict[str, Any]:
        """Decoding settings that enter the cache key."""
        out: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample}
        if self.do_sample:
            out["temperature"] = self.temperature
        return out

    def load(self) -> tuple[Any, Any]:
        """Load (once) and return ``(model, tokenizer)``."""
        if self._model is None or self._tokenizer is None:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            require_hub(str(self.model_path), "The judge model")  # a hub id with no network: fail now, not after retries
            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            self._tokenizer = AutoTokenizer.from_pretrained(
                self.model_path, trust_remote_code=self.trust_remote_code
            )
            self._model = AutoModelForCausalLM.from_pretrained(
                self.model_path, dtype=self.dtype, trust_remote_code=self.trust_remote_code
            ).to(device)
            self._model.eval()
        return self._model, self._tokenizer

    def _complete(self, messages: Messages) -> str:
        import torch

        model, tok = self.load()
        if getattr(tok, "chat_template", None) is None:
            raise JudgeUnavailable(f"tokenizer at {self.model_path} has no chat template")
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        enc = tok(text, return_tensors="pt", add_special_tokens=False).to(model.device)
        kwargs = self.decoding()
        if tok.pad_token_id is None and tok.eos_token_id is not None:
            kwargs["pad_token_id"] = tok.eos_token_id
        with torch.no_grad():
            out = model.generate(**enc, **kwargs)
        completion = tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        if not completion.strip():
            raise JudgeUnavailable("judge model generated no text")
        return completion
