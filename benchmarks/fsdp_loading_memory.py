"""Peak host memory (RSS) of each process when ``opct train`` starts under FSDP2 on two gloo processes.

Issue 57: under FSDP2 only rank 0 should read the weights; the other ranks build the model on the meta
device and receive their shards. This writes a random tiny-vocabulary Llama of about 170 MB (float32),
launches one training step with ``accelerate launch`` (FSDP2, two CPU processes) and records, per rank,
the process's peak RSS (``ru_maxrss``) once policy and teacher are loaded and sharded (before anything
trains: what the loading costs) and at the end of the step (the step's own peak on top), and the safetensors files it opened (Python's ``open``, watched with
``sys.addaudithook``, and safetensors' own ``safe_open`` and ``load_file``, which open files in Rust). Run it once with the code before the change and once after::

    PYTHONPATH=/work/main python benchmarks/fsdp_loading_memory.py --label before --out before.json
    PYTHONPATH=$PWD python benchmarks/fsdp_loading_memory.py --label after --out after.json

Both runs use the same model, data, settings and allocator setting (:data:`MMAP_THRESHOLD`); the difference of the peaks between the two runs is
what the loading and the teacher cost (the baseline of a process, torch and transformers imported, is in
both). Full fine-tuning by default (the frozen teacher is a second model there); ``--finetune lora`` too.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

#: The worker ``accelerate launch`` starts: ``opct train``, then its own peak RSS and weight-file opens.
WORKER = r"""
import json, os, resource, runpy, sys
import safetensors, safetensors.torch
opened = []
def watch(event, args):  # Python's own open()
    if event == "open" and isinstance(args[0], str) and args[0].endswith(".safetensors"):
        opened.append(args[0])
sys.addaudithook(watch)
def recording(fn):  # safetensors opens (and maps) files in Rust, unseen by the audit hook
    def wrapper(path, *args, **kwargs):
        opened.append(str(path))
        return fn(path, *args, **kwargs)
    return wrapper
safetensors.safe_open = recording(safetensors.safe_open)  # before transformers imports it
safetensors.torch.load_file = recording(safetensors.torch.load_file)
import opct.training.fsdp as sharding
loading_peak_kb = []
def layout(*args, **kwargs):  # called once policy and teacher are sharded, before anything trains
    loading_peak_kb.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return layout.original(*args, **kwargs)
layout.original, sharding.layout = sharding.layout, layout
rank = int(os.environ.get("RANK", "0"))
try:
    sys.argv = ["opct", *sys.argv[1:]]
    try:
        runpy.run_module("opct.cli", run_name="__main__")
    except SystemExit as done:
        if done.code not in (0, None):
            raise
finally:
    out = os.environ["OPCT_MEMORY_OUT"]
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(f"{out}/rank{rank}.json", "w") as fh:
        json.dump({"rank": rank, "peak_rss_mb_loaded_and_sharded": loading_peak_kb[0] / 1024,
                   "peak_rss_mb": peak_kb / 1024, "opened_weights": sorted(set(opened))}, fh)
"""


#: glibc's fixed mmap threshold for the workers (bytes): a freed tensor of more than this goes back to the
#: system at once. With glibc's default (a threshold that rises after each free, up to 32 MiB), the
#: full tensors a rank receives one at a time and frees stay in its heap, and RSS shows glibc's
#: fragmentation rather than what the process holds.
MMAP_THRESHOLD = 1 << 20


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", required=True, help="what code this measures (before / after)")
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--finetune", choices=["full", "lora"], default="full")
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=6)
    args = ap.parse_args()

    from opct.testing import make_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = make_tiny_model(root / "model", hidden_size=args.hidden, layers=args.layers, heads=12,
                                intermediate_size=args.hidden * 8 // 3)
        weights_mb = sum(f.stat().st_size for f in model.glob("*.safetensors")) / 2**20
        pairs = root / "pairs.jsonl"
        rows = [{"id": f"p{i}", "axis": "sycophancy", "prompt": f"What is {i} + {i}? Surely {i + 3}.",
                 "teacher_prompt": f"What is {i} + {i}?", "meta": {}} for i in range(4)]
        pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
        cfg = {
            "name": "m", "output_dir": str(root / "runs"), "method": "opct", "seed": 0, "finetune": args.finetune,
            "model": {"name_or_path": str(model)}, "lora": {"r": 4, "alpha": 8}, "data": {"train": [str(pairs)]},
            "opct": {"sampling": {"n": 1, "max_new_tokens": 4}},
            "train": {"max_steps": 1, "pairs_per_step": 2, "sequences_per_microbatch": 1, "checkpoint_every": 1},
        }
        (root / "run.yaml").write_text(yaml.safe_dump(cfg))
        acc_cfg = {
            "compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP", "num_machines": 1, "num_processes": 2,
            "mixed_precision": "no", "main_process_port": _free_port(),
            "fsdp_config": {"fsdp_version": 2, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                            "fsdp_reshard_after_forward": True, "fsdp_cpu_ram_efficient_loading": False,
                            "fsdp_state_dict_type": "FULL_STATE_DICT"},
        }
        (root / "accelerate.yaml").write_text(yaml.safe_dump(acc_cfg))
        (root / "worker.py").write_text(WORKER)
        accelerate = str(Path(sys.executable).parent / "accelerate")
        env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "OPCT_MEMORY_OUT": tmp,
               "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD)}
        cmd = [accelerate, "launch", "--config_file", str(root / "accelerate.yaml"), str(root / "worker.py"),
               "train", "--no-progress", "-c", str(root / "run.yaml")]
        start = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"training failed:\n{done.stderr[-4000:]}")
        ranks = [json.loads((root / f"rank{r}.json").read_text()) for r in range(2)]
        for r in ranks:  # the base model's weights, apart from the run's own checkpoint files
            r["read_base_weights"] = any(Path(p).parent == model for p in r["opened_weights"])
            r["opened_weights"] = [str(Path(p).relative_to(root)) for p in r["opened_weights"]]
    report = {
        "label": args.label,
        "what": ("peak RSS (ru_maxrss) of each process of `opct train` under FSDP2, 2 gloo processes on CPU: once "
                 "policy and teacher are loaded and sharded, and after 1 training step"),
        "finetune": args.finetune,
        "model": {"family": "llama (random, tiny vocabulary)", "hidden": args.hidden, "layers": args.layers,
                  "weights_mb": round(weights_mb, 1)},
        "ranks": ranks,
        "wall_s": round(wall, 1),
        "malloc_mmap_threshold": MMAP_THRESHOLD,
        "command": " ".join(["python", "benchmarks/fsdp_loading_memory.py", *sys.argv[1:]]),
        "pythonpath": os.environ.get("PYTHONPATH", ""),
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
