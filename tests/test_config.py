import pytest

from opct.config import ConfigError, RunConfig, load_config


def test_defaults_follow_the_paper_recipe():
    cfg = RunConfig()
    assert (cfg.method, cfg.finetune, cfg.lora.r) == ("opct", "lora", 32)
    assert (cfg.loss.kind, cfg.loss.kl_coef, cfg.loss.kl_discount, cfg.loss.policy_loss) == ("sampled", 1.0, 0.0, "importance_sampling")
    assert cfg.optim.betas == (0.9, 0.95) and cfg.optim.schedule == "constant"
    assert (cfg.train.batch_size, cfg.sampling.n, cfg.sampling.temperature) == (8, 3, 1.0)


def test_yaml_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\noptim:\n  lr: 1.0e-4\ndata:\n  train: a.jsonl\n")
    cfg = load_config(path, ["optim.lr=3e-5", "train.max_steps=7", "lora.target_modules=[q_proj, v_proj]", "loss.kind=topk"])
    assert cfg.optim.lr == 3e-5 and cfg.train.max_steps == 7 and cfg.lora.target_modules == ["q_proj", "v_proj"]
    assert cfg.data.train == ["a.jsonl"] and cfg.loss.kind == "topk"


def test_unknown_and_mistyped_keys_are_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("optim:\n  learning_rate: 1.0e-4\ntrain:\n  batch_size: many\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = str(info.value)
    assert "optim.learning_rate: unknown key" in text and "train.batch_size" in text and str(path) in text
    with pytest.raises(ConfigError, match="sampling.temprature: unknown key"):
        load_config(None, ["sampling.temprature=0.5"])
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(None, ["optim.lr"])
    with pytest.raises(ConfigError, match="loss.kind"):
        load_config(None, ["loss.kind=forward"])
