r"""Peak host memory of one OPCT step on a real vocabulary: the ``[rows, length, vocab]`` logits' share.

Usage (CPU; ``--before`` is another checkout of opct, e.g. main's, measured in the same run)::

    PYTHONPATH=. python benchmarks/logits_memory.py --before /work/main --out benchmarks/results/logits-memory.json

What runs
---------
A tiny Qwen3-shaped model (2 layers, 64 wide, ``opct model tiny``'s shipped config) with the real
151,936-token Qwen3 vocabulary (``--tokenizer``, default ``../shared/models/qwen3-tokenizer``) is written
once. Then, for each code tree (``--before`` if given, then this one) and each loss (``sampled``, the
paper's, and ``full``, the vocabulary-wide reverse KL), one fresh Python subprocess imports opct from
that tree (``PYTHONPATH``; ``--jobs`` of them at a time), trains one OPCT step with ``opct.training.loop.train`` (LoRA, float32, 2
pairs x 4 samples = ``--rows`` rows of exactly ``--length`` completion tokens, one microbatch) and reports
its peak resident set size (``ru_maxrss`` of the subprocess itself) and the loss it logged. With
``--fixed-rollouts`` the sampler returns seeded random completions of exactly ``--length`` tokens instead of
decoding them (the scoring forwards, the loss and the backward, where the logits live, are unchanged; the
decode's own memory is one ``[rows, vocab]`` row of logits per step): on a busy 2-core machine decoding
384 tokens took longer than the rest. ``--profile-pairs 0`` skips the run-start off-policy profile
(:mod:`opct.training.run_profile`), which scores its own samples with whole logits: the step alone. Each
subprocess is fresh, so one measurement's allocations cannot lower or raise another's.

The rows of the JSON: ``code`` (``before``/``after``), ``opct_path`` (the package the subprocess
imported, to show which tree ran), ``loss``, ``peak_rss_gib``, ``train_loss`` and ``wall_s``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LOSSES = {"sampled": {"kind": "sampled"}, "full": {"kind": "full", "divergence": "reverse_kl"}}


def build_model(tokenizer: Path, out: Path) -> Path:
    """The tiny Qwen3 of ``opct model tiny`` with ``tokenizer``'s real vocabulary."""
    from opct.testing.tiny import make_family_model, tiny_config

    return make_family_model(tokenizer, out, config=tiny_config("qwen3"), seed=0)


def write_pairs(path: Path, count: int) -> Path:
    """``count`` consistency pairs with short prompts (the completions dominate the step)."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(count):
            q = f"Question {i}: what is the capital of Zarnia?"
            fh.write(json.dumps({"id": f"q{i}", "prompt": [{"role": "user", "content": q}],
                                 "teacher_prompt": [{"role": "user", "content": f"{q} (Answer honestly.)"}]}) + "\n")
    return path


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """In the subprocess: one OPCT step with the opct on ``PYTHONPATH``; its peak RSS."""
    import resource

    import opct
    from opct.config import RunConfig
    from opct.training.loop import train

    work = Path(spec["work"])
    samples = spec["samples"]
    pairs = spec["rows"] // samples
    cfg = RunConfig.model_validate({
        "name": f"{spec['code']}-{spec['loss']}",
        "output_dir": str(work / "runs"),
        "method": "opct",
        "seed": 0,
        "finetune": "lora",
        "model": {"name_or_path": spec["model"], "dtype": "float32"},
        "data": {"train": [spec["pairs"]]},
        "opct": {
            "sampling": {"n": samples, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": spec["length"],
                         "min_new_tokens": spec["length"]},
            "loss": LOSSES[spec["loss"]],
        },
        "profile": {"pairs_per_axis": spec["profile_pairs"]},
        "train": {"max_steps": 1, "pairs_per_step": pairs, "sequences_per_microbatch": spec["rows"],
                  "checkpoint_every": 10**6, "log_rollouts": False},
    })
    if spec["fixed_rollouts"]:
        _fix_rollouts()
    start = time.perf_counter()
    train(cfg, show_progress=False)
    wall = time.perf_counter() - start
    rows = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    return {
        "code": spec["code"],
        "opct_path": str(Path(opct.__file__).resolve().parent),
        "loss": spec["loss"],
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
        "train_loss": rows[-1].get("loss"),
        "wall_s": round(wall, 1),
    }


def _fix_rollouts() -> None:
    """Make the HF sampler return seeded random completions of exactly ``max_new_tokens`` ids (below 1000) with a
    recorded log-prob of -5 each, instead of decoding: the step's scoring, loss and backward (what is measured)
    are the same work, without the decode's minutes on a busy CPU."""
    import random

    from opct.sampling.engine import Rollout
    from opct.sampling.hf_sampler import HFSampler

    def generate(self, prompts, params, sample_keys=None):
        rng = random.Random(params.seed)
        return [Rollout(i, s, list(p), [rng.randrange(1000) for _ in range(params.max_new_tokens)],
                        [-5.0] * params.max_new_tokens, True)
                for i, p in enumerate(prompts) for s in range(params.n)]

    HFSampler.generate = generate


def measure(code: str, root: Path, loss: str, base: dict[str, Any], work: Path) -> dict[str, Any]:
    """Run one worker subprocess on the opct of ``root`` and return its result row."""
    spec = {**base, "code": code, "loss": loss, "work": str(work / f"{code}-{loss}")}
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
                          env=env, cwd=str(root), capture_output=True, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise SystemExit(f"{code}/{loss} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="another opct checkout to measure first (e.g. main's)")
    parser.add_argument("--tokenizer", type=Path, default=HERE.parent.parent / "shared" / "models" / "qwen3-tokenizer")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--samples", type=int, default=4, help="samples per pair (rows / samples pairs)")
    parser.add_argument("--length", type=int, default=384)
    parser.add_argument("--losses", default="sampled,full")
    parser.add_argument("--fixed-rollouts", action="store_true",
                        help="seeded random completions instead of decoding (the step's scoring and backward unchanged)")
    parser.add_argument("--profile-pairs", type=int, default=8,
                        help="profile.pairs_per_axis of the run (the run-start off-policy profile; 0 skips it)")
    parser.add_argument("--jobs", type=int, default=1, help="subprocesses at a time (peak RSS is per subprocess)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(run_worker(json.loads(args.worker))), flush=True)
        return
    trees = ([("before", args.before.resolve())] if args.before else []) + [("after", HERE.parent)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = {"model": str(build_model(args.tokenizer, work / "model")),
                "pairs": str(write_pairs(work / "pairs.jsonl", args.rows // args.samples)),
                "rows": args.rows, "samples": args.samples, "length": args.length,
                "fixed_rollouts": args.fixed_rollouts, "profile_pairs": args.profile_pairs}
        runs = [(code, root, loss) for loss in args.losses.split(",") for code, root in trees]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # each subprocess's peak is its own
            results = list(pool.map(lambda run: measure(*run, base, work), runs))
        for row in results:
            print(json.dumps(row), flush=True)
    report = {
        "benchmark": "logits_memory",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "settings": {k: getattr(args, k) for k in ("rows", "samples", "length", "jobs", "fixed_rollouts", "profile_pairs")} | {"tokenizer": str(args.tokenizer)},
        "trees": {code: str(root) for code, root in trees},
        "results": results,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
