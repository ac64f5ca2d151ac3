"""A tiny randomly initialised ``LlamaForCausalLM`` with a byte-level BPE tokenizer and chat template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from opct.errors import OpctError, load_folder, read_json

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIALS = ["<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
_CORPUS = [
    "What is the capital of Zarnia? The capital is Velmora.",
    "I think the answer is (B), but what do you think?",
    "Explain how to bake bread. Mix flour, water and yeast, then bake.",
    "Sorry, I can't help with that request.",
    "Warning: keep the lamp away from water. Answer: A",
    "0123456789 + - * / = ( ) [ ] { } , . ; : ! ?",
]


def make_tiny_model(
    out_dir: str | Path,
    vocab_size: int = 512,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    intermediate_size: int = 128,
    max_positions: int = 512,
    seed: int = 0,
) -> Path:
    """Write a random tiny Llama and its tokenizer to ``out_dir`` and return the path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|end|>", pad_token="<|pad|>", chat_template=CHAT_TEMPLATE
    )
    fast.save_pretrained(out)
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg)
    model.generation_config.eos_token_id = fast.eos_token_id
    model.generation_config.pad_token_id = fast.pad_token_id
    model.save_pretrained(out)
    return out


#: The sampling defaults a real instruct checkpoint ships (Qwen2.5-Instruct's ``generation_config.json``).
INSTRUCT_GENERATION = {"do_sample": True, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05}


#: The tiny configs shipped for ``opct model tiny --family`` (2 layers, 64 wide, the family's vocabulary).
TINY_FAMILIES = ("qwen3", "gpt2")


#: The tokenizer class (``tokenizer_config.json``'s ``tokenizer_class``, less ``Fast``) of each family's model type.
FAMILY_TOKENIZERS = {"qwen3": "Qwen2Tokenizer", "gpt2": "GPT2Tokenizer"}


class TokenizerFamilyError(OpctError, ValueError):
    """``opct model tiny`` was given a tokenizer of another family than the model it would build."""


def check_tokenizer_family(tokenizer: Any, model_type: str, source: str) -> None:
    """Refuse a tokenizer whose class is not the one ``model_type``'s family ships (a GPT-2 tokenizer for a
    Qwen3 body): the tiny model promises that family's real tokenizer. A model type not in
    :data:`FAMILY_TOKENIZERS` is not checked."""
    wanted = FAMILY_TOKENIZERS.get(model_type)
    found = type(tokenizer).__name__.removesuffix("Fast")
    if wanted is not None and found != wanted:
        family = next((f for f, cls in FAMILY_TOKENIZERS.items() if cls == found), None)
        theirs = f"the {family} family's" if family else f"a {found}"
        raise TokenizerFamilyError(
            f"--tokenizer {source} is {theirs} tokenizer, not the {model_type} family's ({wanted}): a tiny {model_type} "
            f"model is built with its family's real tokenizer. Give a {model_type} tokenizer"
            + (f", or --family {family}" if family else ""))


def is_tiny_model(folder: Path) -> bool:
    """Whether ``folder`` holds a model ``opct model tiny`` wrote: its ``config.json`` is one of the shipped
    tiny configs' shape (family, depth and width) and its weights are there. The folder it may write over."""
    import json

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(config, dict) or config.get("model_type") not in TINY_FAMILIES:
        return False
    shipped = tiny_config(config["model_type"])
    shape = ("num_hidden_layers", "hidden_size", "n_layer", "n_embd")
    same = all(config.get(k) == shipped[k] for k in shape if k in shipped)
    return same and (folder / "model.safetensors").is_file()


def tiny_config(family: str) -> dict:
    """The shipped 2-layer config of ``family`` (one of :data:`TINY_FAMILIES`)."""
    import json

    if family not in TINY_FAMILIES:
        raise ValueError(f"no tiny config for family {family!r}; choose one of: {', '.join(TINY_FAMILIES)}")
    return json.loads((Path(__file__).parent / "tiny_configs" / f"{family}.json").read_text(encoding="utf-8"))


def make_family_model(
    tokenizer_dir: str | Path,
    out_dir: str | Path,
    generation: dict | None = None,
    seed: int = 0,
    sharpen: float = 1.0,
    config: dict | None = None,
) -> Path:
    """A tiny random model of a real family: its real tokenizer (``tokenizer_dir``: a folder, e.g.
    ``../shared/models/qwen3-tokenizer``, or a hub id) and a small ``config`` of the family (default:
    the folder's ``tiny_config.json``; :func:`tiny_config` gives the shipped ones), saved with the
    tokenizer to ``out_dir``. ``generation`` sets fields of the model's ``generation_config`` (e.g.
    :data:`INSTRUCT_GENERATION`), as a real instruct checkpoint has them. ``sharpen`` scales the output
    layer so that next-token distributions are sharp, as a trained model's are (random weights give
    near-uniform ones, under which sampling-setting bugs hide)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    out = Path(out_dir)
    if config is None:
        config = read_json(Path(tokenizer_dir) / "tiny_config.json", "restore it, or name the family (--family)")
    tok = load_folder(tokenizer_dir, "the tokenizer", "restore the file (copy the tokenizer folder again)",
                      lambda: AutoTokenizer.from_pretrained(str(tokenizer_dir)))
    check_tokenizer_family(tok, str(config.get("model_type", "")), str(tokenizer_dir))
    out.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(out)
    cfg = AutoConfig.for_model(**config)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    if sharpen != 1.0:
        with torch.no_grad():
            model.get_output_embeddings().weight.mul_(sharpen)
    for key, value in (generation or {}).items():
        setattr(model.generation_config, key, value)
    model.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> None:
    """``python -m opct.testing.tiny TOKENIZER_DIR OUT [--instruct] [--template FILE]``: a tiny random model
    of a real family, to try the real-model path offline (see docs/real-models.md)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m opct.testing.tiny", description=main.__doc__)
    parser.add_argument("tokenizer_dir", help="folder with a real tokenizer and tiny_config.json (../shared/models/...)")
    parser.add_argument("out", help="where to write the model and tokenizer")
    parser.add_argument("--instruct", action="store_true", help="give it an instruct checkpoint's sampling defaults")
    args = parser.parse_args(argv)
    path = make_family_model(args.tokenizer_dir, args.out, INSTRUCT_GENERATION if args.instruct else None)
    print(path)


if __name__ == "__main__":
    main()
