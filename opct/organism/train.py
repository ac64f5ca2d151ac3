"""Pre-training the organism: a plain causal-LM loop with loss on assistant tokens."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from opct.organism import DEFAULT_ARCH, check_arch
from opct.organism.corpus import Conversation


@dataclass(frozen=True)
class TrainConfig:
    """Model shape and optimisation hyper-parameters.

    The defaults are Llama's shape; :func:`default_train_config` gives each family's. For GPT-2
    ``intermediate_size`` is ``n_inner`` and ``max_position_embeddings`` is ``n_positions``.
    ``num_threads`` is part of the recipe: the weights are byte-reproducible for one thread count
    (2 on the project's 2-core machine: 0.093 s a step on a quiet machine, against 0.19 with 1).
    """

    hidden_size: int = 192
    intermediate_size: int = 512
    num_layers: int = 4
    num_heads: int = 3
    max_position_embeddings: int = 512
    epochs: float = 1.3
    batch_size: int = 16
    lr: float = 2e-3
    min_lr_ratio: float = 0.05
    warmup_steps: int = 100
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    max_steps: int | None = None
    num_threads: int = 2

    def to_dict(self) -> dict:
        return asdict(self)


def encode_conversations(
    tokenizer: PreTrainedTokenizerBase, convs: list[Conversation]
) -> list[tuple[list[int], list[int]]]:
    """Token ids of each rendered conversation and a 0/1 mask of its assistant tokens (content + end).

    Special tokens delimit every message, so encoding message by message gives exactly the ids of the
    chat template rendered as a whole (checked in the tests).
    """
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    contents = [m["content"] for c in convs for m in c]
    bodies = iter(tokenizer(contents, add_special_tokens=False)["input_ids"])
    out = []
    for conv in convs:
        ids: list[int] = []
        mask: list[int] = []
        for m in conv:
            body = [*next(bodies), end]
            ids += [tokenizer.convert_tokens_to_ids(f"<|{m['role']}|>"), *body]
            mask += [0] + [int(m["role"] == "assistant")] * len(body)
        out.append((ids, mask))
    return out


#: Each family's shape, as changes to :class:`TrainConfig`'s (Llama's) defaults. Qwen3 and GPT-2 are
#: sized so that the three fp32 checkpoints together stay under 25 MB: Qwen3's q/k norms add little
#: but its MLP is narrowed (intermediate 448: 2.02M parameters, 8.07 MB); GPT-2's MLP has two matrices
#: to Llama's three and it learns 512 position embeddings (n_inner 512: 1.88M, 7.51 MB); Llama is
#: 2.16M (8.66 MB).
ARCH_SHAPES: dict[str, dict[str, int]] = {"llama": {}, "qwen3": {"intermediate_size": 448}, "gpt2": {}}


def default_train_config(arch: str = DEFAULT_ARCH) -> TrainConfig:
    """The training configuration of ``arch``: shared hyper-parameters with the family's shape."""
    return TrainConfig(**ARCH_SHAPES[check_arch(arch)])


def _model_config(cfg: TrainConfig, tokenizer: PreTrainedTokenizerBase, arch: str) -> LlamaConfig | Qwen3Config | GPT2Config:
    """The transformers configuration of ``arch`` in ``cfg``'s shape, with the tokenizer's special ids."""
    shared = {"vocab_size": len(tokenizer), "tie_word_embeddings": True, "bos_token_id": tokenizer.bos_token_id,
              "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    if arch == "gpt2":
        return GPT2Config(**shared, n_positions=cfg.max_position_embeddings, n_embd=cfg.hidden_size,
                          n_layer=cfg.num_layers, n_head=cfg.num_heads, n_inner=cfg.intermediate_size,
                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    rotary = {**shared, "hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size,
              "num_hidden_layers": cfg.num_layers, "num_attention_heads": cfg.num_heads,
              "num_key_value_heads": cfg.num_heads, "max_position_embeddings": cfg.max_position_embeddings}
    if arch == "qwen3":
        return Qwen3Config(**rotary, head_dim=cfg.hidden_size // cfg.num_heads)
    return LlamaConfig(**rotary)


_MODEL_CLASSES: dict[str, type[PreTrainedModel]] = {
    "llama": LlamaForCausalLM, "qwen3": Qwen3ForCausalLM, "gpt2": GPT2LMHeadModel,
}


def make_model(cfg: TrainConfig, tokenizer: PreTrainedTokenizerBase, seed: int, arch: str = DEFAULT_ARCH) -> PreTrainedModel:
    """A freshly initialised model of family ``arch`` in ``cfg``'s shape (deterministic in ``seed``).

    Every family ties its input and output embeddings and takes its end-of-sequence and padding ids
    from the shared organism tokenizer (which has no beginning-of-sequence token).
    """
    config = _model_config(cfg, tokenizer, check_arch(arch))
    torch.manual_seed(seed)
    return _MODEL_CLASSES[arch](config)


def _batches(lengths: list[int], batch_size: int, gen: torch.Generator) -> list[list[int]]:
    order = torch.randperm(len(lengths), generator=gen).tolist()
    chunk = batch_size * 64
    batches: list[list[int]] = []
    for s in range(0, len(order), chunk):
        group = sorted(order[s : s + chunk], key=lambda i: lengths[i])
        batches += [group[j : j + batch_size] for j in range(0, len(group), batch_size)]
    perm = torch.randperm(len(batches), generator=gen).tolist()
    return [batches[i] for i in perm]


def _collate(encoded: list[tuple[list[int], list[int]]], idx: list[int], pad: int) -> dict[str, torch.Tensor]:
    width = max(len(encoded[i][0]) for i in idx)
    input_ids = torch.full((len(idx), width), pad, dtype=torch.long)
    labels = torch.full((len(idx), width), -100, dtype=torch.long)
    attn = torch.zeros((len(idx), width), dtype=torch.long)
    for r, i in enumerate(idx):
        ids, mask = encoded[i]
        n = len(ids)
        input_ids[r, :n] = torch.tensor(ids)
        attn[r, :n] = 1
        labels[r, :n] = torch.tensor([t if m else -100 for t, m in zip(ids, mask, strict=True)])
    return {"input_ids": input_ids, "attention_mask": attn, "labels": labels}


def assistant_token_loss(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy over the labelled (assistant) positions of ``batch``.

    The same value as ``model(**batch).loss``, but the output layer is applied only where a label is:
    61% of the corpus's tokens are prompt tokens, and the vocabulary projection is about a sixth of
    the organism's work per token.
    """
    hidden = model.base_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    labels = batch["labels"][:, 1:]                                      # (B, T-1): the next token of each position
    where = (labels != -100).flatten().nonzero().squeeze(1)              # (K,) flat positions with a label
    picked = hidden[:, :-1].flatten(0, 1).index_select(0, where)         # (K, H)
    logits = model.get_output_embeddings()(picked)                       # (K, V)
    return torch.nn.functional.cross_entropy(logits.float(), labels.flatten().index_select(0, where))


def pretrain(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    corpus: list[Conversation],
    cfg: TrainConfig,
    seed: int,
    log: Callable[[str], None] = print,
) -> dict:
    """Train ``model`` on ``corpus`` in place; returns a small summary (steps, final loss, seconds)."""
    torch.set_num_threads(cfg.num_threads)
    torch.use_deterministic_algorithms(True)
    encoded = encode_conversations(tokenizer, corpus)
    lengths = [len(e[0]) for e in encoded]
    gen = torch.Generator().manual_seed(seed)
    n_epochs = math.ceil(cfg.epochs)
    plan: list[list[int]] = []
    for _ in range(n_epochs):
        plan += _batches(lengths, cfg.batch_size, gen)
    total = int(len(plan) * cfg.epochs / n_epochs)
    if cfg.max_steps is not None:
        total = min(total, cfg.max_steps)
    plan = plan[:total]

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr, betas=(0.9, 0.98), eps=1e-8,
    )

    def lr_at(step: int) -> float:
        if step < cfg.warmup_steps:
            return cfg.lr * (step + 1) / cfg.warmup_steps
        t = (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)
        return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))

    model.train()
    start = time.time()
    ema = None
    for step, idx in enumerate(plan):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        batch = _collate(encoded, idx, tokenizer.pad_token_id)
        loss = assistant_token_loss(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 50 == 0 or step == total - 1:
            log(f"step {step + 1}/{total} loss {ema:.4f} lr {lr_at(step):.2e} {time.time() - start:.0f}s")
    model.eval()
    return {"steps": total, "final_loss_ema": ema, "seconds": round(time.time() - start, 1),
            "tokens": sum(lengths[i] for b in plan for i in b)}
