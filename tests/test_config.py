import pytest

from opct.config import ConfigError, RunConfig, load_config


def test_defaults_follow_the_paper_recipe():
    cfg = RunConfig()
    assert (cfg.method, cfg.finetune, cfg.lora.r) == ("opct", "lora", 32)
    loss, sampling = cfg.method_config.loss, cfg.method_config.sampling
    assert (loss.kind, loss.kl_coef, loss.kl_discount, loss.policy_loss) == ("sampled", 1.0, 0.0, "importance_sampling")
    assert cfg.optim.betas == (0.9, 0.95) and cfg.optim.schedule == "constant"
    assert (cfg.train.pairs_per_step, sampling.n, sampling.temperature) == (8, 3, 1.0)


def test_yaml_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\noptim:\n  lr: 1.0e-4\ndata:\n  train: a.jsonl\n")
    cfg = load_config(path, ["optim.lr=3e-5", "train.max_steps=7", "lora.target_modules=[q_proj, v_proj]", "opct.loss.kind=topk"])
    assert cfg.optim.lr == 3e-5 and cfg.train.max_steps == 7 and cfg.lora.target_modules == ["q_proj", "v_proj"]
    assert cfg.data.train == ["a.jsonl"] and cfg.method_config.loss.kind == "topk"


def test_unknown_and_mistyped_keys_are_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("optim:\n  learning_rate: 1.0e-4\ntrain:\n  batch_size: many\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = str(info.value)
    assert "optim.learning_rate: unknown key" in text and "train.batch_size" in text and str(path) in text
    with pytest.raises(ConfigError, match="opct.sampling.temprature: unknown key"):
        load_config(None, ["opct.sampling.temprature=0.5"])
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(None, ["optim.lr"])
    with pytest.raises(ConfigError, match="opct.loss"):
        load_config(None, ["opct.loss.kind=forward"])


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["opct.loss.kind=topk", "opct.loss.kl_coef=2"], "opct.loss.topk.kl_coef: unknown key"),
        (["opct.loss.kind=full", "opct.loss.topk=5"], "opct.loss.full.topk: unknown key"),
        (["opct.loss.kind=sampled", "opct.loss.divergence=jsd"], "opct.loss.sampled.divergence: unknown key"),
        (["opct.loss.clip_eps=0.3"], "clip_eps is used only with policy_loss: ppo"),
        (["opct.loss.kind=full", "opct.loss.jsd_beta=0.3"], "jsd_beta is used only with divergence: jsd"),
        (["bct.targets.n=2"], "section 'bct' configures method 'bct', but this run's method is 'opct'"),
        (["method=bct", "opct.sampling.n=2"], "section 'opct' configures method 'opct', but this run's method is 'bct'"),
        (["method=sft"], "method 'sft' is not registered"),
        (["train.batch_size=8"], "train.batch_size: unknown key"),
    ],
)
def test_a_key_the_chosen_kind_does_not_use_is_an_error_naming_it(overrides, named):
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    assert named in str(info.value)


def test_each_kind_keeps_its_own_keys_and_defaults():
    ppo = load_config(None, ["opct.loss.policy_loss=ppo"]).method_config.loss
    assert (ppo.kind, ppo.clip_eps) == ("sampled", 0.2)
    jsd = load_config(None, ["opct.loss.kind=full", "opct.loss.divergence=jsd"]).method_config.loss
    assert (jsd.kind, jsd.jsd_beta) == ("full", 0.5)
    topk = load_config(None, ["opct.loss.kind=topk"]).method_config.loss
    assert topk.model_dump() == {"kind": "topk", "topk": 20, "form": "partial"}
    bct = load_config(None, ["method=bct", "bct.targets.n=2"])
    assert bct.method_config.targets.n == 2 and bct.method_config.targets.temperature == 0.0


def test_dump_round_trips_with_the_method_section():
    from opct.config import dump_config

    cfg = load_config(None, ["opct.loss.kind=full", "opct.sampling.max_new_tokens=7"])
    tree = dump_config(cfg)
    assert tree["opct"]["loss"]["kind"] == "full" and tree["opct"]["sampling"]["max_new_tokens"] == 7
    assert "bct" not in tree
    again = RunConfig.model_validate(tree)
    assert dump_config(again) == tree


def test_a_generation_section_overrides_only_the_keys_it_names():
    """``opct.sampling: {n: 2}`` keeps OPCT's temperature 1.0 (not the greedy class default)."""
    sampling = load_config(None, ["opct.sampling.n=2"]).method_config.sampling
    assert (sampling.n, sampling.temperature, sampling.max_new_tokens) == (2, 1.0, 1024)
    targets = load_config(None, ["method=bct", "bct.targets.max_new_tokens=9"]).method_config.targets
    assert (targets.n, targets.temperature, targets.max_new_tokens) == (1, 0.0, 9)


def test_an_enum_value_yaml_reads_as_a_boolean_is_taken_as_written(tmp_path):
    """Issue 73: YAML reads a bare ``off`` (and ``no``) as false; the documented values are accepted as written,
    in a file and through --set."""
    from opct.config import load_config

    path = tmp_path / "run.yaml"
    path.write_text("name: t\ndata: {train: [organism:sycophancy:train]}\noptim: {master_weights: off}\n"
                    "train: {mixed_precision: no}\n", encoding="utf-8")
    cfg = load_config(path)
    assert cfg.optim.master_weights == "off" and cfg.train.mixed_precision == "no"
    assert load_config(path, ["optim.master_weights=off"]).optim.master_weights == "off"
