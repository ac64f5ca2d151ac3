"""A trained checkpoint's model card carries Hugging Face front matter, its adapter names its base so
that it loads on another machine, and ``opct export --push-to-hub`` publishes through ``HfApi``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import make_pairs, run_config
from huggingface_hub import ModelCard
from typer.testing import CliRunner

ALIAS = "opct-test-base"  # registered for this module, like the organism's `organism`


def _record(**overrides: object) -> dict:
    record = {"format": 2, "method": "opct", "finetune": "lora", "base_model": "Qwen/Qwen2.5-0.5B-Instruct",
              "revision": None, "base_weights_sha256": "0123456789abcdef",
              "model": {"dtype": "float32"},
              "data": {"sources": ["organism:sycophancy:train", "org/pairs-set", "pairs.jsonl", "attacker:x.jsonl"],
                       "hash": "h", "pairs": 4}}
    return {**record, **overrides}


def test_card_metadata_names_the_hub_base_library_tags_and_named_sources():
    from opct.runs.model_card import card_metadata

    meta = card_metadata(_record())
    assert meta["base_model"] == "Qwen/Qwen2.5-0.5B-Instruct" and meta["library_name"] == "peft"
    assert meta["tags"] == ["opct", "consistency-training"]  # the method is opct: named once
    assert meta["datasets"] == ["organism:sycophancy:train", "org/pairs-set"]  # no local files
    assert "license" not in meta  # the base's card is not in the cache: nothing invented
    full = card_metadata(_record(finetune="full", method="bct", data={"sources": ["p.jsonl"], "hash": "h", "pairs": 1}))
    assert full["library_name"] == "transformers" and full["tags"][-1] == "bct" and "datasets" not in full
    merged = card_metadata(_record(merged_from="/somewhere/final"))
    assert merged["library_name"] == "transformers"  # an export is one complete model folder


def test_a_local_base_gives_no_base_model_but_its_card_license(tmp_path):
    from opct.runs.model_card import card_metadata

    (tmp_path / "README.md").write_text("---\nlicense: mit\n---\n# base\n", encoding="utf-8")
    meta = card_metadata(_record(base_model=str(tmp_path)))
    assert "base_model" not in meta and meta["license"] == "mit"


@pytest.fixture(scope="module")
def aliased_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """One LoRA step on a base given by an alias (as ``organism`` is): ``(root, run_dir)``."""
    from opct.config import MODEL_ALIASES, RunConfig
    from opct.training.loop import train

    root = tmp_path_factory.mktemp("card")
    base = root / "installed" / "base"
    shutil.copytree(tiny_model, base)
    (root / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in make_pairs(4)), encoding="utf-8")
    MODEL_ALIASES.register(ALIAS, lambda: base)
    try:
        tree = run_config(Path(ALIAS), root / "pairs.jsonl", root / "runs", **{"train.max_steps": 1})
        tree["model"]["name_or_path"] = ALIAS
        tree["data"]["train"] = [str(root / "pairs.jsonl")]
        run = train(RunConfig.model_validate(tree), show_progress=False).run_dir.resolve()
        yield root, run
    finally:
        MODEL_ALIASES.unregister(ALIAS)


def test_the_final_card_loads_with_huggingface_hub(aliased_run):
    _, run = aliased_run
    card = ModelCard.load(run / "final" / "README.md")
    data = card.data.to_dict()
    assert data["library_name"] == "peft" and data["tags"] == ["opct", "consistency-training"]
    assert "base_model" not in data  # an alias is no hub id; the text names it
    assert f"base model: `{ALIAS}`" in card.text and "## Evaluation" in card.text


def test_an_aliased_adapter_names_its_alias_not_the_installed_folder(aliased_run, tmp_path, monkeypatch):
    from opct.models import CheckpointError, load_for_inference

    root, run = aliased_run
    config = json.loads((run / "final" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == ALIAS  # not root/installed/base
    assert str(root / "installed") not in (run / "final" / "README.md").read_text().split("## Configuration")[0]
    moved = tmp_path / "other-machine" / "run"
    shutil.copytree(run, moved)
    monkeypatch.chdir(tmp_path)
    model, _ = load_for_inference(str(moved))  # opct resolves the alias where it is installed here
    assert type(model).__name__.startswith("Llama")

    from opct.config import MODEL_ALIASES

    other = tmp_path / "other-base"  # the alias resolving to other weights: refused by the recorded sha256
    shutil.copytree(root / "installed" / "base", other)
    _perturb(other)
    MODEL_ALIASES.register(ALIAS, lambda: other, replace=True)
    try:
        with pytest.raises(CheckpointError):
            load_for_inference(str(moved))
    finally:
        MODEL_ALIASES.register(ALIAS, lambda: root / "installed" / "base", replace=True)


def _perturb(folder: Path) -> None:
    """Change one weight of the model in ``folder`` (another base under the same name)."""
    import torch
    from safetensors.torch import load_file, save_file

    weights = folder / "model.safetensors"
    tensors = load_file(weights)
    name = next(iter(tensors))
    tensors[name] = tensors[name] + torch.ones_like(tensors[name]) * 1e-2
    save_file(tensors, weights, metadata={"format": "pt"})


class FakeHub:
    """Records what ``HfApi`` was asked, and keeps a copy of the folder it was given."""

    def __init__(self, keep: Path) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.keep = keep

    def install(self, monkeypatch: pytest.MonkeyPatch, token: str | None = "hf_test") -> None:
        import huggingface_hub

        hub = self

        def create_repo(self, repo_id, **kwargs):
            hub.calls.append(("create_repo", {"repo_id": repo_id, "token": self.token, **kwargs}))
            return f"https://huggingface.co/{repo_id}"

        def upload_folder(self, **kwargs):
            hub.calls.append(("upload_folder", kwargs))
            shutil.copytree(kwargs["folder_path"], hub.keep)
            return "commit"

        monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
        monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
        monkeypatch.setattr(huggingface_hub, "get_token", lambda: token)


def test_export_push_to_hub_creates_the_repo_and_uploads_the_export(aliased_run, tmp_path, monkeypatch):
    from opct.cli.main import app

    _, run = aliased_run
    hub = FakeHub(tmp_path / "uploaded")
    hub.install(monkeypatch)
    res = CliRunner().invoke(app, ["export", str(run), "--push-to-hub", "me/tiny-opct", "--private"])
    assert res.exit_code == 0, res.output
    assert [name for name, _ in hub.calls] == ["create_repo", "upload_folder"]
    assert hub.calls[0][1]["repo_id"] == "me/tiny-opct" and hub.calls[0][1]["private"] is True
    assert hub.calls[0][1]["token"] == "hf_test" and hub.calls[1][1]["repo_id"] == "me/tiny-opct"
    uploaded = hub.keep
    assert (uploaded / "config.json").exists() and not (uploaded / "adapter_config.json").exists()
    card = ModelCard.load(uploaded / "README.md")
    assert card.data.library_name == "transformers" and "opct" in card.data.tags


def test_push_to_hub_without_a_token_is_refused_before_merging(aliased_run, tmp_path, monkeypatch):
    from opct.cli.main import app

    _, run = aliased_run
    hub = FakeHub(tmp_path / "uploaded")
    hub.install(monkeypatch, token=None)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    out = tmp_path / "merged"
    res = CliRunner().invoke(app, ["export", str(run), "--out", str(out), "--push-to-hub", "me/tiny-opct"])
    assert res.exit_code == 2 and "hf auth login" in res.output and "HF_TOKEN" in res.output
    assert hub.calls == [] and not out.exists()


def test_a_hub_error_names_the_repository_and_keeps_the_export(tmp_path, monkeypatch):
    import huggingface_hub

    from opct.training.export import HubPushError, push_to_hub

    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "opct_checkpoint.json").write_text("{}", encoding="utf-8")

    def refuse(self, repo_id, **kwargs):
        raise OSError("403 Forbidden: you may not write to this repository")

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", refuse)
    with pytest.raises(HubPushError) as info:
        push_to_hub(folder, "someone/else", token="hf_test")
    assert "someone/else" in str(info.value) and "403" in str(info.value) and info.value.exit_code == 1
    assert folder.exists()


def test_export_needs_out_or_push(tmp_path):
    from opct.cli.main import app

    res = CliRunner().invoke(app, ["export", str(tmp_path)])
    assert res.exit_code == 2 and "--push-to-hub" in res.output
    assert os.listdir(tmp_path) == []


def _local_paths(folder: Path) -> list[str]:
    """Every absolute path of this machine that a text file of ``folder`` holds (``/x/y...`` that exists)."""
    import re

    found = []
    for file in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix != ".safetensors"):
        text = file.read_text(encoding="utf-8", errors="replace")
        for candidate in re.findall(r"(/[\w.-]+(?:/[\w.-]+)+)", text):
            if Path(candidate).exists() or candidate.startswith(("/tmp/", "/work/", "/home/", "/root/")):
                found.append(f"{file.name}: {candidate}")
    return found


def test_adapter_only_push_uploads_the_adapter_with_a_portable_base(aliased_run, tmp_path, monkeypatch):
    """``--adapter-only --push-to-hub``: the adapter as LoRA users load it (no merge), naming its base as
    another machine can; no file uploaded holds a local path; the base's sha256 is whole."""
    from opct.cli.main import app

    _, run = aliased_run
    hub = FakeHub(tmp_path / "uploaded")
    hub.install(monkeypatch)
    res = CliRunner().invoke(app, ["export", str(run), "--adapter-only", "--push-to-hub", "me/tiny-adapter"])
    assert res.exit_code == 0, res.output
    uploaded = hub.keep
    assert (uploaded / "adapter_model.safetensors").exists() and not (uploaded / "model.safetensors").exists()
    assert json.loads((uploaded / "adapter_config.json").read_text())["base_model_name_or_path"] == ALIAS
    card = ModelCard.load(uploaded / "README.md")
    assert card.data.library_name == "peft" and "model-index" not in card.data.to_dict()  # no eval of it exists
    record = json.loads((uploaded / "opct_checkpoint.json").read_text())
    assert len(record["base_weights_sha256"]) == 64 and record["base_weights_sha256"] in card.text
    assert record["exported_from"] == f"{run.name}/final" and "merged_from" not in record
    assert _local_paths(uploaded) == []


def test_no_exported_file_holds_a_local_path(aliased_run, tmp_path):
    """A local base (an absolute path in final/) is named by its folder name in the export, merged or not."""
    from opct.training.export import export_merged

    root, run = aliased_run
    local = tmp_path / "run"
    shutil.copytree(run, local)
    for name in ("opct_checkpoint.json", "adapter_config.json"):
        file = local / "final" / name
        data = json.loads(file.read_text())
        if name == "adapter_config.json":
            data["base_model_name_or_path"] = str(root / "installed" / "base")
        else:
            data["base_model"] = data["model"]["name_or_path"] = str(root / "installed" / "base")
            data["data"]["sources"] = [str(root / "pairs.jsonl")]
        file.write_text(json.dumps(data))
    assert _local_paths(local / "final")  # the check sees them where they are
    merged = export_merged(local, tmp_path / "merged")
    adapter = export_merged(local, tmp_path / "adapter", adapter_only=True)
    assert _local_paths(merged) == [] and _local_paths(adapter) == []
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == "base"
    assert json.loads((merged / "opct_checkpoint.json").read_text())["data"]["sources"] == ["pairs.jsonl"]


def test_the_cards_model_index_comes_from_the_runs_own_evals(aliased_run, tmp_path):
    """An eval of exactly the exported weights fills the card's model-index (values, intervals, n), found in
    the run's experiment without being named; an eval of other weights is left out and said."""
    import yaml

    from opct.cli.main import app
    from opct.training.export import export_merged

    _, run = aliased_run
    experiment = tmp_path / "exp"
    shutil.copytree(run, experiment / "train" / run.name)
    evals = experiment / "eval" / run.name
    res = CliRunner().invoke(app, ["eval", "--model", str(run), "--evals", "capability", "--limit", "2",
                                   "--max-new-tokens", "2", "--out", str(evals), "--no-progress", "--allow-unscored"])
    assert res.exit_code == 0, res.output
    # the random tiny model never ends an answer: every capability answer is cut off, a wrong answer, and each
    # eval finishes ("status": "ok"). Mark all but one incomplete, as an eval that left records unscored is,
    # to see the complete one published and the incomplete ones left out and said.
    kept = evals / "capability_mc" / "results.json"
    assert json.loads(kept.read_text())["status"] == "ok"
    for task in ("capability_arithmetic", "capability_chain", "capability_format"):
        path = evals / task / "results.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "status": "incomplete", "unscored": 2}))
    other = tmp_path / "other-eval"
    shutil.copytree(evals, other)
    manifest = json.loads((other / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**manifest, "weights_sha256": "0" * 16}))

    out = export_merged(experiment / "train" / run.name, tmp_path / "merged", eval_results=[other])
    card = (out / "README.md").read_text()
    index = yaml.safe_load(card.split("---")[1])["model-index"]
    metrics = {m["type"]: m for r in index[0]["results"] for m in r["metrics"]}
    results = {name: est for name, est in json.loads(kept.read_text())["metrics"].items() if "/" not in name}
    assert metrics and set(metrics) == set(results)
    for name, est in results.items():
        assert metrics[name]["value"] == round(est["value"], 4) and f"n={est['n']}" in metrics[name]["name"]
    assert ModelCard.load(out / "README.md").data.to_dict()["model-index"][0]["name"] == "merged"
    assert "measured other weights" in card and "capability_arithmetic: incomplete (2 of 2 records unscored)" in card
    plain = export_merged(run, tmp_path / "alone")  # a run of its own with no eval named: nothing invented
    assert "model-index" not in (plain / "README.md").read_text()


def _lm_eval_model_args(card: str, folder: Path) -> dict[str, str]:
    """The ``--model_args`` of the card's lm-eval line, ``<this folder>`` read as ``folder``."""
    import re

    found = re.search(r"lm_eval --model hf --model_args (.+?) \.\.\.", card)
    assert found, card
    args = found[1].replace("<this folder>", str(folder))
    return dict(arg.split("=", 1) for arg in args.split(","))


def test_an_export_with_base_model_loads_with_peft_and_its_lm_eval_line(aliased_run, tmp_path):
    """``--base-model PATH``: adapter_config.json and the card name it, ``AutoPeftModelForCausalLM`` loads the
    export on it with no opct in between, and the card's lm-eval ``model_args`` load in lm-eval's ``HFLM``."""
    import torch
    from lm_eval.models.huggingface import HFLM
    from peft import AutoPeftModelForCausalLM

    from opct.cli.main import app
    from opct.models import load_for_inference

    root, run = aliased_run
    base = root / "installed" / "base"
    out = tmp_path / "adapter"
    res = CliRunner().invoke(app, ["export", str(run), "--adapter-only", "--out", str(out), "--base-model", str(base)])
    assert res.exit_code == 0, res.output
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == str(base)
    card = (out / "README.md").read_text()
    assert f"base model: `{base}`" in card
    loaded = AutoPeftModelForCausalLM.from_pretrained(out)
    ids = torch.tensor([[1, 2, 3, 4]])
    reference, _ = load_for_inference(str(run))
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, reference(ids).logits, atol=1e-5)  # the trained adapter, on its base
    args = _lm_eval_model_args(card, out)
    assert args == {"pretrained": str(base), "peft": str(out), "tokenizer": str(out)}
    lm = HFLM(device="cpu", batch_size=1, **args)
    assert type(lm.model).__name__.startswith("Peft")


def test_an_export_without_base_model_names_the_alias_and_a_hub_id_base_goes_in_the_front_matter(aliased_run, tmp_path):
    """Without ``--base-model`` the adapter names its base portably (the alias); a hub id given is the card's
    ``base_model``; a path that is no model folder and no hub id is refused before anything is written."""
    from opct.training.export import ExportError, export_merged

    _, run = aliased_run
    plain = export_merged(run, tmp_path / "plain", adapter_only=True)
    assert json.loads((plain / "adapter_config.json").read_text())["base_model_name_or_path"] == ALIAS
    hub = export_merged(run, tmp_path / "hub", adapter_only=True, base_model="someone/tiny-base")
    assert json.loads((hub / "adapter_config.json").read_text())["base_model_name_or_path"] == "someone/tiny-base"
    assert ModelCard.load(hub / "README.md").data.base_model == "someone/tiny-base"
    with pytest.raises(ExportError, match="no folder here and no hub id"):
        export_merged(run, tmp_path / "bad", adapter_only=True, base_model="./no/such/base/folder")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ExportError, match="holds no config.json"):
        export_merged(run, tmp_path / "bad", adapter_only=True, base_model=str(tmp_path / "empty"))
    assert not (tmp_path / "bad").exists()
