"""vLLM colocated per process under FSDP2 and DDP: two CPU processes on gloo, each with the fake vLLM.

``accelerate launch`` starts two training processes of ``opct train`` with ``opct.sampling.engine: vllm``;
``tests/fake_vllm`` is first on their ``PYTHONPATH`` (their ``import vllm`` finds the fake, which records
every engine's calls to ``FAKE_VLLM_LOG``). What is checked, per process: it built exactly one engine,
as its own rank of a world of two; under LoRA it received the adapter (never full weights), the same
whole tensors on both processes (gathered from the shards under FSDP2) and, at step 2, exactly the
adapter the step-1 checkpoint holds; under full fine-tuning it received the full weights, at step 2
those of the step-1 checkpoint; the engine slept after each generation (so through the scoring and the
backward that follow) and woke before the next sync and generation; and each process sampled its own
prompts, none of the other's. What a fake cannot show (a real vLLM's memory, speed, LoRA kernels,
its distributed start-up under ``external_launcher``) is listed in docs/training.md.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import run_config
from safetensors.torch import load_file

from tests.fake_vllm.vllm import tensor_sha256

FAKE_VLLM = Path(__file__).parent / "fake_vllm"
#: The training process: the fake's engine needs no GPU, so the CUDA check before importing vLLM is skipped.
WORKER = """
import importlib, runpy, sys
import opct.sampling.vllm_sampler as sampler_module
sampler_module.import_vllm = lambda: importlib.import_module("vllm")
sys.argv = ["opct", *sys.argv[1:]]
runpy.run_module("opct.cli", run_name="__main__")
"""
LAUNCH = {
    "fsdp": {
        "distributed_type": "FSDP",
        "fsdp_config": {"fsdp_version": 2, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                        "fsdp_reshard_after_forward": True, "fsdp_state_dict_type": "FULL_STATE_DICT",
                        "fsdp_cpu_ram_efficient_loading": True},  # tests/test_fsdp.py launches with false
    },
    "ddp": {"distributed_type": "MULTI_GPU"},  # on CPU (no GPU visible): torchrun, gloo, DDP
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(tmp_path: Path, cfg: dict, launch: str) -> list[dict]:
    """Train ``cfg`` on two processes (``launch``: fsdp or ddp); each engine's record, by rank."""
    acc_cfg = {"compute_environment": "LOCAL_MACHINE", "num_machines": 1, "num_processes": 2, "mixed_precision": "no",
               "main_process_port": _free_port(), **LAUNCH[launch]}
    (tmp_path / "accelerate.yaml").write_text(yaml.safe_dump(acc_cfg))
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "worker.py").write_text(WORKER)
    log = tmp_path / "engines"
    log.mkdir()
    path = os.pathsep.join(p for p in (str(FAKE_VLLM), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": path, "FAKE_VLLM_LOG": str(log)}
    accelerate = str(Path(sys.executable).parent / "accelerate")
    cmd = [accelerate, "launch", "--config_file", str(tmp_path / "accelerate.yaml"), str(tmp_path / "worker.py"),
           "train", "--no-progress", "-c", str(tmp_path / "run.yaml")]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    records = [json.loads(f.read_text()) for f in sorted(log.glob("*.json"))]
    assert [f.name for f in sorted(log.glob("*.json"))] == ["rank0-engine0.json", "rank1-engine0.json"]  # one each
    return records


def _checkpoint(run: Path, step: int) -> dict[str, str]:
    """The trainable tensors a checkpoint holds, as the fake logs them (PEFT's names: no adapter name)."""
    tensors = load_file(str(run / "checkpoints" / f"step-{step}" / "model.safetensors"))
    return {name.replace(".default.", "."): tensor_sha256(t) for name, t in tensors.items()}


def _own_prompts(records: list[dict], pairs_per_process: int, samples: int) -> None:
    """At every step each process sampled its own share of the pairs, ``samples`` requests each, none of the other's."""
    for step in range(len(records[0]["prompts"])):
        shares = [[tuple(p) for p in r["prompts"][step]] for r in records]
        assert all(len(share) == pairs_per_process * samples for share in shares)
        assert all(len(set(share)) == pairs_per_process for share in shares)
        assert not set(shares[0]) & set(shares[1])


@pytest.mark.parametrize("launch", ["fsdp", "ddp"])
def test_each_process_gets_its_own_engine_and_the_adapter_only(launch, tiny_model, pairs_file, tmp_path):
    cfg = run_config(tiny_model, pairs_file, tmp_path / "out", **{
        "opct.sampling.engine": "vllm", "train.max_steps": 2, "train.checkpoint_every": 1,
        "train.sequences_per_microbatch": 2})
    records = _launch(tmp_path, cfg, launch)
    assert [(r["rank"], r["world_size"]) for r in records] == [(0, 2), (1, 2)]
    for r in records:
        assert r["settings"]["enable_lora"] and r["settings"]["max_lora_rank"] == 8
        assert r["settings"]["enable_sleep_mode"] and r["settings"]["distributed_executor_backend"] == "external_launcher"
        assert r["full_weight_loads"] == []  # the base weights never travel under LoRA
        assert r["events"] == ["generate+lora1", "sleep(1)", "wake_up(kv_cache,weights)", "generate+lora2", "sleep(1)"]
    first, second = ([r["adapters"][step]["tensors"] for r in records] for step in range(2))
    assert first[0] == first[1] and second[0] == second[1]  # whole tensors, the same on both processes
    assert second[0] == _checkpoint(tmp_path / "out" / "t", 1)  # step 2 samples the adapter step 1 trained
    _own_prompts(records, pairs_per_process=2, samples=2)


def test_full_finetuning_under_fsdp_pushes_the_gathered_weights(tiny_model, pairs_file, tmp_path):
    cfg = run_config(tiny_model, pairs_file, tmp_path / "out", finetune="full", **{
        "opct.sampling.engine": "vllm", "train.max_steps": 2, "train.checkpoint_every": 1,
        "train.sequences_per_microbatch": 2})
    records = _launch(tmp_path, cfg, "fsdp")
    base = {name: tensor_sha256(t) for name, t in load_file(str(tiny_model / "model.safetensors")).items()}
    for r in records:
        assert "enable_lora" not in r["settings"] and r["adapters"] == []
        assert r["events"] == [
            "load_weights", "reset_prefix_cache", "generate", "sleep(2)",
            "wake_up(weights)", "load_weights", "wake_up(kv_cache)", "generate", "sleep(2)",
        ]
        start, after_step_1 = r["full_weight_loads"]
        assert start == base  # whole tensors, gathered from the shards
        assert after_step_1 == _checkpoint(tmp_path / "out" / "t", 1)
    _own_prompts(records, pairs_per_process=2, samples=2)
