"""Log-probs and divergences from final hidden states, a chunk of positions at a time, against the same
quantities from whole ``[N, L, V]`` logits: values and gradients (to the hidden states and the output
layer's weight and bias), for chunk sizes that do and do not divide the positions, with soft-capping and
logit scaling; and every family of the matrix giving its forward's logits from its hidden states."""

from __future__ import annotations

import pytest
import torch

from opct.methods import losses
from opct.sampling.hidden_logits import OutputHead, completion_hidden, hidden_scoring, output_head
from opct.sampling.logit_rows import LogitRows, logprobs_and_entropy
from opct.sampling.scoring import CompletionBatch, completion_logits, token_entropy_sum, token_logprobs

N, L, H, V = 3, 5, 8, 11
MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)  # 9 positions
CHUNKS = [1, 2, 4, 7, 64]  # 9 positions: chunks that do not divide them, one that holds them all


def _heads(dtype: torch.dtype, softcap: float | None, scale: float) -> tuple[OutputHead, OutputHead]:
    g = torch.Generator().manual_seed(2)
    student = torch.nn.Linear(H, V, bias=True, dtype=dtype)
    teacher = torch.nn.Linear(H, V, bias=False, dtype=dtype).requires_grad_(False)
    with torch.no_grad():
        student.weight.copy_(torch.randn(V, H, generator=g) * 0.8)
        student.bias.copy_(torch.randn(V, generator=g))
        teacher.weight.copy_(torch.randn(V, H, generator=g) * 0.8)
    return OutputHead(student, scale=scale, softcap=softcap), OutputHead(teacher, softcap=softcap, temperature=0.7)


def _hidden(dtype: torch.dtype, seed: int) -> torch.Tensor:
    return torch.randn(N, L, H, generator=torch.Generator().manual_seed(seed), dtype=dtype).requires_grad_(True)


def _grads(value: torch.Tensor, head: OutputHead, hidden: torch.Tensor) -> list[torch.Tensor]:
    weights = torch.linspace(0.5, 1.5, N * L, dtype=value.dtype).reshape(N, L)  # a non-uniform upstream gradient
    return list(torch.autograd.grad((value * weights).sum(), [hidden, head.layer.weight, head.layer.bias]))


def _close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    if dtype == torch.float64:
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    else:  # float32: within 1e-6 of the largest value
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6 * float(want.detach().abs().max()))


HEADS = [(None, 1.0), (2.5, 1.0), (None, 0.3), (2.5, 0.3)]  # plain, soft-capped, scaled, both


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("softcap", "scale"), HEADS)
@pytest.mark.parametrize("chunk", CHUNKS)
def test_logprobs_from_hidden_states_equal_the_whole_logits_ones(dtype, softcap, scale, chunk):
    head, _ = _heads(dtype, softcap, scale)
    hidden = _hidden(dtype, 0)
    targets = torch.randint(0, V, (N, L), generator=torch.Generator().manual_seed(3))
    got, entropy = logprobs_and_entropy(LogitRows(hidden=hidden, head=head), targets, MASK, chunk)
    whole_logits = head(hidden)
    want = token_logprobs(whole_logits, targets) * MASK
    _close(got, want, dtype)
    assert entropy == pytest.approx(token_entropy_sum(whole_logits.detach(), MASK), rel=1e-6)
    for g, w in zip(_grads(got, head, hidden), _grads(want, head, hidden), strict=True):
        _close(g, w, dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("softcap", "scale"), HEADS)
@pytest.mark.parametrize("divergence", ["reverse_kl", "forward_kl", "jsd", "topk"])
@pytest.mark.parametrize("chunk", CHUNKS)
def test_divergences_from_hidden_states_equal_the_whole_logits_ones(dtype, softcap, scale, divergence, chunk):
    student_head, teacher_head = _heads(dtype, softcap, scale)
    hidden, teacher_hidden = _hidden(dtype, 0), _hidden(dtype, 1).detach()

    def loss(student, teacher, chunk_size):
        if divergence == "topk":
            return losses.topk_reverse_kl(student, teacher, MASK, k=4, chunk_size=chunk_size)
        return losses.full_divergence(student, teacher, MASK, divergence, beta=0.3, chunk_size=chunk_size)

    got = loss(LogitRows(hidden=hidden, head=student_head), LogitRows(hidden=teacher_hidden, head=teacher_head), chunk)
    want = loss(student_head(hidden), teacher_head(teacher_hidden), 10**6)
    _close(got, want, dtype)
    assert float(want.detach().abs().sum()) > 0.1  # a divergence the check can see
    for g, w in zip(_grads(got, student_head, hidden), _grads(want, student_head, hidden), strict=True):
        _close(g, w, dtype)
    assert teacher_head.layer.weight.grad is None  # the teacher's side takes no gradient


def test_the_teacher_temperature_and_soft_cap_are_applied_in_the_forward_order():
    layer = torch.nn.Linear(H, V, bias=False, dtype=torch.float64)
    h = torch.randn(4, H, dtype=torch.float64)
    z = layer(h) * 0.5
    want = torch.tanh(z / 3.0) * 3.0 / 0.7  # scale, cap, then the teacher temperature
    torch.testing.assert_close(OutputHead(layer, scale=0.5, softcap=3.0).at_temperature(0.7)(h), want, rtol=0, atol=0)


def test_rows_need_one_source():
    with pytest.raises(ValueError, match="whole logits, or hidden states"):
        LogitRows(hidden=torch.zeros(1, 1, H))


class _Vocabulary:
    """What :func:`opct.testing.families.family_config` reads from a tokenizer, for a 300-token vocabulary."""

    eos_token_id = 1
    pad_token_id = 0

    def __len__(self) -> int:
        return 300


def _family_model(family: str, tied: bool | None = None) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    from opct.testing.families import family_config

    config = family_config(family, _Vocabulary())
    if tied is not None:
        config.tie_word_embeddings = tied
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).float().eval()


BATCH = CompletionBatch(prompts=[list(range(5, 29)), list(range(40, 57))],
                        completions=[[7, 8, 9, 10, 11], [3, 4, 5], [60, 61, 62, 63, 64, 65], [70]], prompt_of=[0, 0, 1, 1])


def _family_names() -> list[str]:
    from opct.testing.families import FAMILIES

    return sorted(FAMILIES)


@pytest.mark.parametrize("family", _family_names())
def test_every_family_gives_its_forward_logits_from_its_hidden_states(family):
    """The family matrix: the self-check passes, and ``head(hidden)`` is the forward's logits (shared prefix
    too); Gemma-2's soft-capping is found."""
    model = _family_model(family)
    head = hidden_scoring(model, pad_id=0)
    assert head is not None
    if family == "gemma2":
        assert head.softcap == model.config.final_logit_softcapping is not None
    with torch.no_grad():
        for share in (False, True):
            whole = completion_logits(model, BATCH, 0, share_prefix=share)
            hidden = completion_hidden(model, BATCH, 0, share_prefix=share)
            assert hidden.shape[-1] != whole.shape[-1]  # hidden states, not logits
            _, mask = BATCH.targets_and_mask()
            diff = (head(hidden) - whole).abs()[mask].max()
            assert float(diff) <= 1e-5 * float(whole.abs()[mask].max())


def test_a_tied_output_layer_gets_the_whole_logits_gradient():
    """Full fine-tuning of a model whose output layer is its input embedding: every parameter's gradient (the
    shared embedding's from both of its uses) equals the whole-logits one."""
    model = _family_model("llama", tied=True).train()
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    head = output_head(model)
    assert isinstance(head, OutputHead)
    targets, mask = BATCH.targets_and_mask()
    rows = LogitRows(hidden=completion_hidden(model, BATCH, 0), head=head)
    chunked, _ = logprobs_and_entropy(rows, targets, mask, chunk_size=3)
    chunked.sum().backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    whole = token_logprobs(completion_logits(model, BATCH, 0), targets) * mask
    whole.sum().backward()
    torch.testing.assert_close(chunked, whole, rtol=1e-6, atol=1e-6)
    for name, p in model.named_parameters():
        torch.testing.assert_close(got[name], p.grad, rtol=1e-5, atol=1e-6 * float(p.grad.abs().max()), msg=name)


def test_a_head_that_is_not_a_plain_linear_layer_is_refused_with_its_reason():
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(_family_model("llama"), LoraConfig(r=2, target_modules=["lm_head"]))
    reason = output_head(model)
    assert isinstance(reason, str) and "not a plain linear layer" in reason
    with pytest.warns(UserWarning, match="chunked logits from hidden states is off"):
        assert hidden_scoring(model, pad_id=0) is None
