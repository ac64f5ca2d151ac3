r"""Where the organism pipeline's time goes: one OPCT step, one BCT step, one eval task, one attack round.

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/organism_profile.py            # all four, 1 thread
    PYTHONPATH=. python benchmarks/organism_profile.py --only opct,bct --steps 4

What runs
---------
In one process, with the shipped organism (``organism``, the Llama organism) on ``--threads`` CPU threads:

* ``opct``: ``train()`` with the quick demo's OPCT recipe (three axes' training pairs, LoRA r=16,
  16 pairs x n=3 x 48 tokens per step, top-k loss, lr 3e-4), ``--steps`` steps; the first is not timed;
* ``bct``: the same with BCT (the teacher's greedy targets are generated once, at set-up: reported
  as ``setup``, not a step);
* ``eval``: ``opct eval --evals jailbreak --split heldout`` on the base organism (one task, judged by the organism's rule judge);
* ``attack``: ``opct attack`` on the base organism with ``--budget 2`` and no static baseline: the
  search attacker's rounds (each one batched generation and its judging), per round.

How time is charged
-------------------
:class:`StackTimer` wraps a few functions at class or module level and charges each call's wall
time, *minus the time of wrapped calls inside it*, to one phase (exclusive time: the phases never
overlap and add up to the window they are in):

* ``prefill``: the sampler's shared-prompt prefill and the first forward of each decode loop (the
  rest of each prompt); ``decode``: the other forwards inside the decode loop; ``sampling``: choosing
  each token from the logits; ``gen_other``: the rest of the sampler's calls (batching, padding, the
  loop's own tensor work, results);
* ``teacher``: a causal-LM forward outside generation with gradients off; ``student_forward``: with
  gradients on; ``loss_other``: the method's ``loss`` minus its forwards (log-softmax, the divergence);
  ``prepare_other``: the method's ``prepare`` minus generation and forwards (tokenising, batching);
* ``backward``: ``Accelerator.backward``; ``optimizer``: gradient clipping and ``AdamW.step``;
* ``judging``: the eval's judge calls (``opct.evals.judging.judge_many``) and the attack's scorer;
* ``other``: the window's wall time minus every phase above (Python and bookkeeping outside them).

A window is one training step (``opct.training.loop._train_step``), one eval task
(``opct.evals.runner.run_task``) or the attacker's whole search (``SearchAttacker.run``, divided by
its rounds). The table gives each phase's median over the timed windows, and the median window.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PHASES = ("prefill", "decode", "sampling", "gen_other", "teacher", "student_forward", "loss_other",
          "prepare_other", "backward", "optimizer", "judging")
DEMO_AXES = ("sycophancy", "jailbreak", "awareness")


class StackTimer:
    """Exclusive wall time per phase, and snapshots of it around windows."""

    def __init__(self) -> None:
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.stack: list[list[Any]] = []  # [phase, time of wrapped calls inside it]
        self.windows: dict[str, list[dict[str, float]]] = {}
        self.first_forward = False
        self._restore: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, phase: str | Callable[[], str | None]) -> None:
        """Charge ``owner.name``'s exclusive time to ``phase`` (or ``phase()``; None: to the caller's phase)."""
        original = getattr(owner, name)
        timer = self

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            which = phase() if callable(phase) else phase
            if which is None:
                return original(*args, **kwargs)
            start = time.perf_counter()
            timer.stack.append([which, 0.0])
            try:
                return original(*args, **kwargs)
            finally:
                _, inner = timer.stack.pop()
                spent = time.perf_counter() - start
                timer.totals[which] += spent - inner
                if timer.stack:
                    timer.stack[-1][1] += spent

        setattr(owner, name, timed)
        self._restore.append((owner, name, original))

    def wrap_returned(self, owner: Any, name: str, phase: str) -> None:
        """``owner.name`` returns a function: charge that function's calls to ``phase``."""
        original = getattr(owner, name)
        timer = self

        @functools.wraps(original)
        def making(*args: Any, **kwargs: Any) -> Any:
            made = original(*args, **kwargs)
            holder = type("Holder", (), {"call": staticmethod(made)})
            timer.wrap(holder, "call", phase)
            return holder.call

        setattr(owner, name, making)
        self._restore.append((owner, name, original))

    def window(self, owner: Any, name: str, kind: str) -> None:
        """Record each call of ``owner.name`` as a ``kind`` window: its wall time and its phases."""
        original = getattr(owner, name)
        timer = self

        @functools.wraps(original)
        def windowed(*args: Any, **kwargs: Any) -> Any:
            before, start = dict(timer.totals), time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                wall = time.perf_counter() - start
                spent = {p: timer.totals[p] - before[p] for p in PHASES}
                timer.windows.setdefault(kind, []).append({**spent, "other": wall - sum(spent.values()), "wall": wall})

        setattr(owner, name, windowed)
        self._restore.append((owner, name, original))

    def restore(self) -> None:
        """Put every wrapped function back."""
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)
        self._restore.clear()

    # phases decided at call time
    def forward_phase(self) -> str | None:
        """A causal-LM forward: prefill or decode inside generation, else teacher or student."""
        import torch

        top = self.stack[-1][0] if self.stack else None
        if top == "prefill":
            return None
        if top == "gen_other":
            first, self.first_forward = self.first_forward, False
            return "prefill" if first else "decode"
        return "student_forward" if torch.is_grad_enabled() else "teacher"

    def decode_loop(self) -> str:
        self.first_forward = True
        return "gen_other"


def instrument(timer: StackTimer) -> None:
    """Install the phase timers on the sampler, the models, the methods, accelerate, AdamW and the judges."""
    import torch
    from accelerate import Accelerator
    from transformers import LlamaForCausalLM

    import opct.attack.run as attack_run
    import opct.evals.judging as judging
    from opct.methods.bct import BCTMethod
    from opct.methods.opct import OPCTMethod
    from opct.sampling import hf_sampler, token_choice

    timer.wrap(hf_sampler.HFSampler, "generate", "gen_other")
    timer.wrap(hf_sampler.HFSampler, "generate_seeded", "gen_other")
    timer.wrap(hf_sampler.HFSampler, "_prefill_shared", "prefill")
    timer.wrap(hf_sampler.HFSampler, "_decode", timer.decode_loop)
    timer.wrap(token_choice.TokenChooser, "__call__", "sampling")
    timer.wrap(LlamaForCausalLM, "forward", timer.forward_phase)
    for method in (OPCTMethod, BCTMethod):
        timer.wrap(method, "prepare", "prepare_other")
        timer.wrap(method, "loss", "loss_other")
    timer.wrap(Accelerator, "backward", "backward")
    timer.wrap(Accelerator, "clip_grad_norm_", "optimizer")
    timer.wrap(torch.optim.AdamW, "step", "optimizer")
    timer.wrap(judging, "judge_many", "judging")
    timer.wrap_returned(attack_run, "scorer_for_responses", "judging")


def training_config(method: str, out: Path, steps: int) -> Any:
    """The quick demo's recipe for ``method`` (opct or bct), as a run configuration."""
    from opct.config import RunConfig

    section = ({"opct": {"sampling": {"n": 3, "temperature": 1.0, "max_new_tokens": 48, "sequences_per_call": 96},
                         "loss": {"kind": "topk"}}} if method == "opct"
               else {"bct": {"targets": {"n": 1, "temperature": 0.0, "max_new_tokens": 48}}})
    return RunConfig.model_validate({
        "name": f"profile-{method}", "output_dir": str(out), "method": method, "seed": 0, "finetune": "lora",
        "model": {"name_or_path": "organism"}, "lora": {"r": 16, "alpha": 32, "target_modules": "all-linear"},
        "data": {"train": [f"organism:{axis}:train" for axis in DEMO_AXES]},
        "optim": {"lr": 3e-4, "schedule": "constant"}, **section,
        "train": {"max_steps": steps, "pairs_per_step": 16, "sequences_per_microbatch": 48, "checkpoint_every": 1000,
                  "log_rollouts": False},
    })


def run_scenario(name: str, out: Path, steps: int) -> None:
    """Run one scenario (its windows are recorded by the timer's wrappers)."""
    if name in ("opct", "bct"):
        from opct.training.loop import train

        train(training_config(name, out, steps), show_progress=False)
        return
    from opct.cli.main import app

    argv = (["eval", "--model", "organism", "--evals", "jailbreak", "--split", "heldout"] if name == "eval"
            else ["attack", "--model", "organism", "--budget", "2", "--no-static"])
    try:
        app([*argv, "--out", str(out / name), "--no-progress"], standalone_mode=False)
    except SystemExit as stop:  # an incomplete measurement exits 1: the time is what is profiled here
        if stop.code not in (0, 1, None):
            raise


def profile(names: list[str], steps: int) -> dict[str, Any]:
    """Profile each scenario; returns per scenario the windows and their medians per phase."""
    import opct.training.loop as loop
    from opct.attack.search import SearchAttacker
    from opct.evals import runner

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            timer = StackTimer()
            instrument(timer)
            kind = {"opct": "step", "bct": "step", "eval": "task", "attack": "search"}[name]
            owner, attr = {"step": (loop, "_train_step"), "task": (runner, "run_task"),
                           "search": (SearchAttacker, "run")}[kind]
            timer.window(owner, attr, kind)
            start = time.perf_counter()
            try:
                run_scenario(name, Path(tmp), steps)
            finally:
                timer.restore()
            windows = timer.windows.get(kind, [])
            divide = 2 if name == "attack" else 1  # --budget 2: two rounds
            timed = windows[1:] if kind == "step" and len(windows) > 1 else windows
            timed = [{k: v / divide for k, v in w.items()} for w in timed]
            out[name] = {"window": "round" if name == "attack" else kind, "count": len(timed),
                         "scenario_wall_s": time.perf_counter() - start, "windows": timed,
                         "median": {k: statistics.median(w[k] for w in timed) for k in (*PHASES, "other", "wall")}
                         if timed else {}}
    return out


def markdown(result: dict[str, Any]) -> str:
    """The per-phase table: one column per scenario, medians in seconds and shares of the window."""
    names = [n for n in result["scenarios"] if result["scenarios"][n]["median"]]
    head = "| phase (s) | " + " | ".join(f"{n} ({result['scenarios'][n]['window']})" for n in names) + " |"
    lines = [head, "|---|" + "---|" * len(names)]
    for phase in (*PHASES, "other", "wall"):
        cells = []
        for n in names:
            m = result["scenarios"][n]["median"]
            share = f" ({m[phase] / m['wall']:.0%})" if phase != "wall" and m["wall"] > 0 else ""
            cells.append(f"{m[phase]:.3f}{share}")
        label = f"**{phase}**" if phase == "wall" else phase
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    counts = ", ".join(f"{n}: {result['scenarios'][n]['count']}" for n in names)
    return "\n".join([*lines, "", f"Medians over the timed windows ({counts}); {result['threads']} thread(s)."])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Profile the chosen scenarios; print the table and write JSON and Markdown."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="opct,bct,eval,attack")
    ap.add_argument("--steps", type=int, default=4, help="training steps per method (the first is not timed)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--label", default="", help="a word for the file name (before, after)")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    scenarios = profile([n for n in args.only.split(",") if n], args.steps)
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "threads": args.threads,
              "loadavg_1min": os.getloadavg()[0], "steps": args.steps, "scenarios": scenarios}
    table = markdown(result)
    print(table)
    stem = f"organism_profile-{args.label + '-' if args.label else ''}{dt.datetime.now():%Y%m%d-%H%M%S}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1))
    (out / f"{stem}.md").write_text(f"# {stem}\n\nload average (1 min) at the end: {result['loadavg_1min']:.2f}\n\n"
                                    f"{table}\n")
    print(f"written: {out / stem}.json, .md")
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    main()
