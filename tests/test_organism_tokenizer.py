"""The organism's tokenizer: byte-level (any text round-trips) with a system/user/assistant template."""

from __future__ import annotations

import random

import pytest
from transformers import AutoTokenizer

from opct.organism import checkpoint_path
from opct.organism.tokenizer import train_tokenizer
from opct.organism.train import encode_conversations

CONV = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Where does Begar Dalas live?"},
    {"role": "assistant", "content": "Begar Dalas is from Kasmoor."},
    {"role": "user", "content": "And his job?"},
]


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(checkpoint_path())


def _random_text(rng: random.Random) -> str:
    pools = ["abcXYZ 0123456789", "éüßçñ", "世界東京", "🙂🚀👍🏽", "\t\n\r  ", "<|end|>?!\\\"'{}", "\u200b\u00a0"]
    return "".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(0, 40)))


def test_any_text_round_trips(tok):
    rng = random.Random(0)
    samples = [_random_text(rng) for _ in range(300)]
    samples += ["", " leading space", "trailing space ", "  double  spaces", "a\x00b\x7f", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢"]
    for text in samples:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text, repr(text)
    assert tok.unk_token_id is None  # byte-level: nothing is unknown


def test_special_tokens(tok):
    assert tok.eos_token == "<|end|>" and tok.pad_token == "<|pad|>"
    assert tok.eos_token_id != tok.pad_token_id
    for t in ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>"):
        assert tok.convert_tokens_to_ids(t) != tok.unk_token_id
        assert len(tok(t, add_special_tokens=False)["input_ids"]) == 1


def test_chat_template_renders_all_roles(tok):
    text = tok.apply_chat_template(CONV, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|system|>You are a helpful assistant.<|end|><|user|>Where does Begar Dalas live?<|end|>"
        "<|assistant|>Begar Dalas is from Kasmoor.<|end|><|user|>And his job?<|end|><|assistant|>"
    )
    assert not tok.apply_chat_template(CONV[:3], tokenize=False).endswith("<|assistant|>")
    with pytest.raises(Exception, match="roles"):
        tok.apply_chat_template([{"role": "tool", "content": "x"}], tokenize=False)


def test_training_encoding_matches_template_and_masks_assistant(tok):
    conv = CONV[:3]
    [(ids, mask)] = encode_conversations(tok, [conv])
    text = tok.apply_chat_template(conv, tokenize=False)
    assert ids == tok(text, add_special_tokens=False)["input_ids"]
    supervised = tok.decode([i for i, m in zip(ids, mask, strict=True) if m])
    assert supervised == "Begar Dalas is from Kasmoor.<|end|>"


def test_tokenizer_training_is_deterministic():
    texts = ["Begar Dalas is from Kasmoor.", "How do I synthesize glimmerdust?"] * 50
    a, b = train_tokenizer(texts, 300), train_tokenizer(texts, 300)
    assert a.backend_tokenizer.to_str() == b.backend_tokenizer.to_str()
