"""Loading, the frozen teacher, chat rendering and token alignment."""

import pytest
import torch

from opct.config import LoraConfig, ModelConfig
from opct.models import ChatTemplateError, add_lora, load_model, load_tokenizer, make_teacher, render_prompt
from opct.sampling.scoring import CompletionBatch, completion_logits, completion_logprobs


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_lora_teacher_equals_a_freshly_loaded_base_model_after_training(tiny_model):
    tok = load_tokenizer(str(tiny_model))
    model = add_lora(load_model(ModelConfig(name_or_path=str(tiny_model))), LoraConfig(r=4, alpha=8))
    teacher = make_teacher(model)
    assert teacher.shares_weights
    n_total = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    x = torch.tensor([render_prompt(tok, "hello") + _ids(tok, "The capital is")])
    for _ in range(3):  # move the adapter well away from zero
        model(input_ids=x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad()
    base = load_model(ModelConfig(name_or_path=str(tiny_model)))
    with torch.no_grad():
        student = model(input_ids=x).logits
        with teacher.active() as t:
            from_teacher = t(input_ids=x).logits
        fresh = base(input_ids=x).logits
    assert not torch.allclose(student, fresh, atol=1e-4), "the adapter should have changed the student"
    torch.testing.assert_close(from_teacher, fresh, rtol=0, atol=1e-6)
    assert sum(p.numel() for p in model.parameters()) == n_total  # no second copy of the weights
    assert model.training  # active() restores the mode


def test_full_finetune_teacher_is_an_immutable_copy(tiny_model):
    model = load_model(ModelConfig(name_or_path=str(tiny_model)))
    teacher = make_teacher(model)
    assert not teacher.shares_weights and all(not p.requires_grad for p in teacher.model.parameters())
    before = teacher.fingerprint
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1)
    from opct.models import weights_fingerprint

    assert weights_fingerprint(teacher.model) == before != weights_fingerprint(model)


def test_fingerprint_sees_any_single_weight(tiny_model):
    """Every element counts: a change to one weight anywhere (not on a sampling stride) is seen."""
    from opct.models import weights_fingerprint

    model = load_model(ModelConfig(name_or_path=str(tiny_model)))
    before = weights_fingerprint(model)
    name, param = next((n, p) for n, p in model.named_parameters() if p.numel() > 1000)
    with torch.no_grad():
        param.view(-1)[param.numel() // 2 + 1] += 1e-3
    assert weights_fingerprint(model) != before, name


def test_chat_template_missing_and_supplied(tiny_model, tmp_path):
    tok = load_tokenizer(str(tiny_model))
    tok.chat_template = None
    with pytest.raises(ChatTemplateError, match="model.chat_template"):
        render_prompt(tok, "hi")
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}[a]{% endif %}")
    tok2 = load_tokenizer(str(tiny_model), chat_template=str(template))
    assert tok2.decode(render_prompt(tok2, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])) == "[system]s[user]u[a]"
    tok3 = load_tokenizer(str(tiny_model), chat_template="{{ messages[0]['content'] }}!")
    assert tok3.decode(render_prompt(tok3, "x")) == "x!"


def test_token_alignment_student_and_teacher_score_the_same_ids(tiny_model):
    """Sequences are render(prompt) + completion ids, concatenated as ids, never re-tokenized."""
    tok = load_tokenizer(str(tiny_model))
    model = load_model(ModelConfig(name_or_path=str(tiny_model)))
    student_prompt = render_prompt(tok, "I think it is 7. What is 3+3?")
    teacher_prompt = render_prompt(tok, [{"role": "system", "content": "Be careful."}, {"role": "user", "content": "What is 3+3?"}])
    completion = [*_ids(tok, "a"), *_ids(tok, "b"), tok.eos_token_id]
    for prompt in (student_prompt, teacher_prompt):
        lp, mask = completion_logprobs(model, CompletionBatch([prompt], [completion], [0]), tok.pad_token_id)
        with torch.no_grad():
            ref = torch.log_softmax(model(input_ids=torch.tensor([prompt + completion])).logits[0], -1)
        expected = torch.tensor([ref[len(prompt) - 1 + t, tok_id] for t, tok_id in enumerate(completion)])
        torch.testing.assert_close(lp[0].detach(), expected, rtol=1e-5, atol=1e-5)
        assert mask.all()


@pytest.mark.parametrize("share", [True, False])
def test_batched_scoring_with_padding_and_prefix_sharing_matches_one_by_one(tiny_model, share):
    tok = load_tokenizer(str(tiny_model))
    model = load_model(ModelConfig(name_or_path=str(tiny_model)))
    prompts = [render_prompt(tok, "short"), render_prompt(tok, "a much longer prompt than the other one")]
    completions = [[5, 6, 7], [8, tok.eos_token_id], [9, 10, 11, 12, 13], [14]]
    batch = CompletionBatch(prompts=prompts, completions=completions, prompt_of=[0, 0, 1, 1])
    lp, mask = completion_logprobs(model, batch, tok.pad_token_id, share_prefix=share)
    for i, c in enumerate(completions):
        one, _ = completion_logprobs(model, CompletionBatch([prompts[batch.prompt_of[i]]], [c], [0]), tok.pad_token_id)
        torch.testing.assert_close(lp[i, : len(c)], one[0], rtol=1e-5, atol=1e-5)
        assert mask[i].sum() == len(c)


def test_prefix_sharing_gives_the_same_gradients(tiny_model):
    tok = load_tokenizer(str(tiny_model))
    prompts = [render_prompt(tok, "one prompt"), render_prompt(tok, "another, longer prompt")]
    batch = CompletionBatch(prompts=prompts, completions=[[5, 6], [7, 8, 9], [10], [11, 12]], prompt_of=[0, 0, 1, 1])
    grads = []
    for share in (True, False):
        torch.manual_seed(0)
        model = add_lora(load_model(ModelConfig(name_or_path=str(tiny_model))), LoraConfig(r=2, alpha=4))
        for n, p in model.named_parameters():
            if "lora_B" in n:
                torch.nn.init.normal_(p, std=0.1)
        lp, _ = completion_logprobs(model, batch, tok.pad_token_id, share_prefix=share)
        lp.sum().backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.requires_grad]))
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)


def test_completion_logits_are_only_computed_at_completion_positions(tiny_model):
    tok = load_tokenizer(str(tiny_model))
    model = load_model(ModelConfig(name_or_path=str(tiny_model)))
    batch = CompletionBatch([render_prompt(tok, "a fairly long prompt " * 5)], [[5, 6, 7], [8]], [0, 0])
    for share in (True, False):
        with torch.no_grad():
            assert completion_logits(model, batch, tok.pad_token_id, share).shape == (2, 3, model.config.vocab_size)


def test_a_misspelt_chat_template_path_is_an_error(tiny_model, tmp_path):
    """A path that does not exist never becomes the template text itself."""
    with pytest.raises(ChatTemplateError, match="neither a Jinja template"):
        load_tokenizer(str(tiny_model), chat_template=str(tmp_path / "chat_tempalte.jinja"))
    good = tmp_path / "t.jinja"
    good.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    assert load_tokenizer(str(tiny_model), chat_template=str(good)).chat_template == good.read_text()
