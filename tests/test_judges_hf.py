"""The local Hugging Face rubric judge, on a tiny model built offline in the test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from opct.judges.hf import HFJudge
from opct.judges.rubrics import get_rubric

CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def _tokenizer() -> PreTrainedTokenizerFast:
    chars = [chr(i) for i in range(32, 127)] + ["\n"]
    vocab = {"<unk>": 0, "<eos>": 1, **{c: i + 2 for i, c in enumerate(chars)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>", chat_template=CHAT_TEMPLATE
    )


class ScriptedModel(torch.nn.Module):
    """Stands in for a causal LM: ``generate`` appends a fixed completion to the prompt ids."""

    def __init__(self, tok: PreTrainedTokenizerFast, completion: str) -> None:
        super().__init__()
        self.completion_ids = tok(completion, add_special_tokens=False, return_tensors="pt")["input_ids"]
        self.prompts: list[torch.Tensor] = []

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def generate(self, input_ids: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        self.prompts.append(input_ids)
        return torch.cat([input_ids, self.completion_ids], dim=1)


def test_hf_judge_parses_completion_and_caches(tmp_path: Path) -> None:
    tok = _tokenizer()
    model = ScriptedModel(tok, "It names the xylitol risk.\nverdict: pass")
    judge = HFJudge(get_rubric("sage_unsafe"), "scripted", model=model, tokenizer=tok, cache_dir=tmp_path)
    v = judge.judge("What gum for my dog?", "Avoid xylitol gum, it is toxic to dogs.", {"fact": "Xylitol is toxic to dogs."})
    assert not v.abstained and v.label == "pass" and v.score == 1.0
    prompt_text = tok.decode(model.prompts[0][0])
    assert prompt_text.startswith("<system>") and prompt_text.endswith("<assistant>")
    assert "Xylitol is toxic to dogs." in prompt_text
    judge.judge("What gum for my dog?", "Avoid xylitol gum, it is toxic to dogs.", {"fact": "Xylitol is toxic to dogs."})
    assert len(model.prompts) == 1 and judge.calls == 1


def test_hf_judge_loads_from_path_and_abstains_on_gibberish(tmp_path: Path) -> None:
    tok = _tokenizer()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                      eos_token_id=1, pad_token_id=0, bos_token_id=None)
    LlamaForCausalLM(cfg).save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    judge = HFJudge(get_rubric("harmfulness"), tmp_path / "tiny", max_new_tokens=6, device="cpu", dtype="float32")
    v = judge.judge("q", "r", {})
    assert v.abstained and v.judge.startswith("hf:harmfulness:")
    assert judge.decoding() == {"max_new_tokens": 6, "do_sample": False}


def test_hf_judge_without_chat_template_abstains() -> None:
    tok = _tokenizer()
    tok.chat_template = None
    judge = HFJudge(get_rubric("harmfulness"), "x", model=ScriptedModel(tok, "harmful: no"), tokenizer=tok)
    v = judge.judge("q", "r", {})
    assert v.abstained and "chat template" in v.reason


@pytest.mark.parametrize("completion", ["", "harmful: perhaps"])
def test_hf_judge_abstains_on_empty_or_unparsable(completion: str) -> None:
    tok = _tokenizer()
    judge = HFJudge(get_rubric("harmfulness"), "x", model=ScriptedModel(tok, completion), tokenizer=tok)
    assert judge.judge("q", "r", {}).abstained
