"""Training under FSDP2 (accelerate) with two CPU processes on gloo: LoRA and full fine-tuning.

What is checked: the run trains and matches a one-process run step by step; the teacher is never a
whole copy per process (under LoRA it is the policy itself, under full fine-tuning each process
holds about half of it); ``final/`` loads with ``from_pretrained`` and holds exactly the weights the
checkpoint gathered; a resume continues bit for bit; only rank 0 opens the base weights file (rank 1
receives its shards); generation on gathered weights (FSDP2's public ``unshard``/``reshard``) lets
processes decode different numbers of tokens and leaves each unit resharding as it was set; DeepSpeed
and FSDP1 are refused with the reason.
Only CPU/gloo is exercised here, not GPUs or NCCL.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from accelerate.utils import DistributedType
from conftest import run_config
from safetensors.torch import load_file

from opct.config import RunConfig
from opct.training.fsdp import DistributionError, check_distribution
from opct.training.loop import train

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
ACCELERATE_FSDP = {
    "compute_environment": "LOCAL_MACHINE",
    "distributed_type": "FSDP",
    "num_machines": 1,
    "num_processes": 2,
    "mixed_precision": "no",
    "fsdp_config": {
        "fsdp_version": 2,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_reshard_after_forward": True,
        "fsdp_cpu_ram_efficient_loading": False,
        "fsdp_state_dict_type": "FULL_STATE_DICT",
    },
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: ``opct train`` as each process runs it, recording every safetensors file the process opens (safetensors
#: opens and maps files in Rust: its ``safe_open`` and ``load_file`` are wrapped before transformers imports them).
RECORDING_WORKER = """
import json, os, runpy, sys
import safetensors, safetensors.torch
opened = []
def recording(fn):
    def wrapper(path, *args, **kwargs):
        opened.append(os.path.abspath(str(path)))
        return fn(path, *args, **kwargs)
    return wrapper
safetensors.safe_open = recording(safetensors.safe_open)
safetensors.torch.load_file = recording(safetensors.torch.load_file)
try:
    sys.argv = ["opct", *sys.argv[1:]]
    runpy.run_module("opct.cli", run_name="__main__")
finally:
    with open(os.path.join(os.environ["OPENED_LOG"], f"rank{os.environ['RANK']}.json"), "w") as fh:
        json.dump(opened, fh)
"""


def _launch_fsdp(tmp_path: Path, cfg: dict) -> list[list[str]]:
    """``accelerate launch`` (an FSDP2 config file) of ``opct train`` on ``cfg``, two processes; the
    safetensors files each process opened, by rank."""
    acc_cfg = tmp_path / "accelerate_fsdp.yaml"
    acc_cfg.write_text(yaml.safe_dump({**ACCELERATE_FSDP, "main_process_port": _free_port()}))
    run_cfg = tmp_path / f"{cfg['name']}.yaml"
    run_cfg.write_text(yaml.safe_dump(cfg))
    worker = tmp_path / "worker.py"
    worker.write_text(RECORDING_WORKER)
    opened = tmp_path / f"opened-{cfg['name']}-{Path(cfg['output_dir']).name}"
    opened.mkdir()
    accelerate = str(Path(sys.executable).parent / "accelerate")
    cmd = [accelerate, "launch", "--config_file", str(acc_cfg), str(worker), "train", "--no-progress", "-c", str(run_cfg)]
    res = subprocess.run(cmd, env={**ENV, "OPENED_LOG": str(opened)}, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    return [json.loads((opened / f"rank{rank}.json").read_text()) for rank in range(2)]


def _only_rank_0_reads_the_weights(opened: list[list[str]], model_dir: Path) -> None:
    """Rank 0 read the base model's weights file; rank 1 never opened it (it received its shards)."""
    weights = [str((model_dir / "model.safetensors").resolve())]
    assert [sorted(set(files) & set(weights)) for files in opened] == [weights, []], opened


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _same_curve(sharded: list[dict], single: list[dict]) -> None:
    """The same global batch, so the same loss at every step (|difference| <= 1e-4 * max(1, |loss|))."""
    assert len(sharded) == len(single)
    for a, b in zip(sharded, single, strict=True):
        assert torch.isfinite(torch.tensor(a["loss"])) and a["completion_tokens"] == b["completion_tokens"]
        assert abs(a["loss"] - b["loss"]) <= 1e-4 * max(1.0, abs(b["loss"])), (a["loss"], b["loss"])
        assert a["ratio_abs_log_dev"] < 1e-4  # sampling (gathered weights) and scoring (sharded) agree


def _half(held: list[int], total: int) -> None:
    """Two processes, each holding about half of ``total`` elements, together all of it."""
    assert len(held) == 2 and sum(held) == total, (held, total)
    assert all(0.4 * total < h < 0.6 * total for h in held), (held, total)


def _config(tiny_model: Path, pairs_file: Path, out: Path, finetune: str) -> dict:
    return run_config(
        tiny_model, pairs_file, out,
        finetune=finetune, **{"train.max_steps": 2, "train.checkpoint_every": 1, "train.sequences_per_microbatch": 2},
    )


def test_lora_under_fsdp_uses_the_sharded_policy_as_teacher(tiny_model, pairs_file, tmp_path):
    cfg = _config(tiny_model, pairs_file, tmp_path / "fsdp", "lora")
    _only_rank_0_reads_the_weights(_launch_fsdp(tmp_path, cfg), tiny_model)
    run = tmp_path / "fsdp" / "t"
    single = RunConfig.model_validate(_config(tiny_model, pairs_file, tmp_path / "one", "lora"))
    train(single, show_progress=False)
    _same_curve(_metrics(run), _metrics(single.run_dir))

    layout = json.loads((run / "manifest.json").read_text())["fsdp"]
    assert layout["teacher"] == "policy_without_adapter"
    _half(layout["policy_elements_held"], layout["policy_elements"])
    assert layout["elements_held"] == layout["policy_elements_held"]  # the teacher adds no element: no second model

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    adapter = load_file(str(run / "final" / "adapter_model.safetensors"))
    gathered = load_file(str(run / "checkpoints" / "step-2" / "model.safetensors"))
    assert len(adapter) == len(gathered) > 0
    for name, tensor in gathered.items():  # final/ drops the adapter's name (".default")
        assert torch.equal(adapter[name.replace(".default", "")], tensor), name
    merged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), run / "final")
    assert any("lora_" in n for n, _ in merged.named_parameters())


def test_full_finetuning_under_fsdp_shards_the_teacher_and_resumes_exactly(tiny_model, pairs_file, tmp_path):
    cfg = _config(tiny_model, pairs_file, tmp_path / "a", "full")
    _only_rank_0_reads_the_weights(_launch_fsdp(tmp_path, cfg), tiny_model)
    run = tmp_path / "a" / "t"
    single = RunConfig.model_validate(_config(tiny_model, pairs_file, tmp_path / "one", "full"))
    train(single, show_progress=False)
    _same_curve(_metrics(run), _metrics(single.run_dir))

    layout = json.loads((run / "manifest.json").read_text())["fsdp"]
    total = layout["policy_elements"]
    assert layout["teacher"] == "sharded_copy"
    _half(layout["teacher_elements_held"], total)
    _half(layout["policy_elements_held"], total)
    # Policy and teacher shards together: about one model per process (DDP's teacher copy would make two).
    assert all(h < 1.2 * total for h in layout["elements_held"]), layout

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(run / "final")
    gathered = load_file(str(run / "checkpoints" / "step-2" / "model.safetensors"))
    state = model.state_dict()
    assert set(gathered) <= set(state) and len(gathered) == sum(1 for _ in model.parameters())
    for name, tensor in gathered.items():
        assert torch.equal(state[name], tensor), name

    # Resume: a copy of the run cut back to its step-1 checkpoint trains step 2 again, identically.
    resumed = tmp_path / "b" / "t"
    shutil.copytree(run, resumed)
    shutil.rmtree(resumed / "checkpoints" / "step-2")
    shutil.rmtree(resumed / "final")
    first = (run / "metrics.jsonl").read_text().splitlines()[0]
    (resumed / "metrics.jsonl").write_text(first + "\n")
    opened = _launch_fsdp(tmp_path, {**cfg, "output_dir": str(tmp_path / "b")})
    _only_rank_0_reads_the_weights(opened, tiny_model)
    step_1 = str((resumed / "checkpoints" / "step-1" / "model.safetensors").resolve())
    assert all(step_1 in files for files in opened)  # each process reads the checkpoint and shards it back
    lines = (resumed / "metrics.jsonl").read_text().splitlines()
    assert lines[0] == first  # step 1 was not trained again (its timings would differ)
    assert _metrics(resumed)[1]["loss"] == _metrics(run)[1]["loss"]
    for name in ("model.safetensors", "optimizer.safetensors"):
        a, b = load_file(str(run / "checkpoints" / "step-2" / name)), load_file(str(resumed / "checkpoints" / "step-2" / name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name


GATHERED_WORKER = """
import copy, datetime, json, torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from opct.training.fsdp import gathered, held_elements, record_resharding
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank = dist.get_rank()

class Net(torch.nn.Module):  # layers and an output head, as a causal LM has them
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(3)])
        self.head = torch.nn.Linear(16, 16)
    def get_output_embeddings(self):
        return self.head
    def forward(self, x):
        return self.head(self.layers(x))

def sharded(module):  # whether the module's weights are its shards now (FSDP2 registers them as DTensors)
    return isinstance(module.weight, DTensor)

torch.manual_seed(0)
model = Net()
reference = copy.deepcopy(model)
for layer in model.layers:
    fully_shard(layer)
fully_shard(model.head)
fully_shard(model)
record_resharding(model, True, keep_root_and_head=True)  # the layers reshard after a forward, the head does not
x = torch.randn(2, 16)
with torch.no_grad():
    model(x)  # collective: both processes
    before = [sharded(m) for m in (*model.layers, model.head)]
    with gathered(model):
        whole = [not sharded(m) for m in (*model.layers, model.head)]
        for _ in range(1 + 3 * rank):  # a different number of forwards on each process
            inside = model(x)
    held = held_elements(model)
    again = model(x)  # collective again: the processes are still in step
    after = [sharded(m) for m in (*model.layers, model.head)]
print(json.dumps({"rank": rank, "held": held, "full": sum(p.numel() for p in reference.parameters()),
                  "inside": torch.allclose(inside, reference(x)), "again": torch.allclose(again, reference(x)),
                  "whole": all(whole), "before": before, "after": after}))
dist.destroy_process_group()
"""


def test_generation_on_gathered_weights_needs_no_step_in_lockstep(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(GATHERED_WORKER)
    world = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": "2"}
    procs = [
        subprocess.Popen([sys.executable, str(script)], env={**ENV, **world, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for rank in range(2)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-3000:]
    rows = [json.loads(line) for out, _ in outputs for line in out.splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in rows) == [0, 1]
    for r in rows:
        assert r["inside"] and r["again"] and r["whole"], r
        assert r["before"] == r["after"] == [True, True, True, False], r  # each unit's resharding as recorded
    _half([r["held"] for r in rows], rows[0]["full"])  # sharded again once generation is over


def test_deepspeed_is_refused_before_accelerate_starts(tiny_model, pairs_file, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    cfg = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path))
    with pytest.raises(DistributionError, match="does not train under DeepSpeed.*FSDP2"):
        train(cfg, show_progress=False)
    assert not (tmp_path / "t" / "manifest.json").exists()


@pytest.mark.parametrize(
    ("kind", "plugin", "message"),
    [
        (DistributedType.DEEPSPEED, None, "DeepSpeed"),
        (DistributedType.FSDP, SimpleNamespace(fsdp_version=1, cpu_ram_efficient_loading=False), "version 2 only"),
    ],
)
def test_unsupported_distributions_are_refused(kind, plugin, message):
    acc = SimpleNamespace(distributed_type=kind, state=SimpleNamespace(fsdp_plugin=plugin))
    with pytest.raises(DistributionError, match=message):
        check_distribution(acc)


def test_fsdp2_and_ddp_are_accepted():
    for ram_efficient in (False, True):  # rank-0 loading is opct's own either way
        fsdp2 = SimpleNamespace(fsdp_version=2, cpu_ram_efficient_loading=ram_efficient)
        check_distribution(SimpleNamespace(distributed_type=DistributedType.FSDP, state=SimpleNamespace(fsdp_plugin=fsdp2)))
    check_distribution(SimpleNamespace(distributed_type=DistributedType.MULTI_CPU, state=SimpleNamespace()))
