"""Evaluate a (trained) model attacker against a target on held-out behaviours (``opct attack --attacker``).

The attacker is any model spec :func:`opct.models.load_for_inference` accepts, including a
``grpo_attack`` run directory (its LoRA is merged). Results are written like the search attacker's
(:func:`opct.attack.results.write_attack_results`), with ``attacker: model`` and the budget
``episodes * rounds`` queries per behaviour, so both attackers are reported the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opct.attack.attacker_data import organism_rewrite_prompt
from opct.attack.grammar import AttackBehavior, behaviors_from_file
from opct.attack.model_attacker import AttackerPrompt, HFAttacker, ModelAttackRunner, RedTeamPrompt
from opct.attack.organism_behaviors import organism_behaviors
from opct.attack.results import write_attack_results
from opct.attack.scorers import make_scorer
from opct.attack.search import Scorer
from opct.config import GenerationConfig
from opct.runs.atomic import write_json_atomic
from opct.runs.manifest import build_manifest, hash_records
from opct.runs.outputs import check_output, output_lock


def model_attack(
    attacker_spec: str,
    target_spec: str,
    behaviors: Sequence[AttackBehavior],
    prompt: AttackerPrompt,
    scorer: Scorer,
    out_dir: Path,
    episodes: int = 8,
    rounds: int = 3,
    threshold: float = 0.5,
    attacker_generation: GenerationConfig | None = None,
    target_generation: GenerationConfig | None = None,
    seed: int = 0,
    judge: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Run :class:`ModelAttackRunner` with a local HF attacker against a local HF target; returns results.json.

    ``attacker_generation`` defaults to temperature 0.9, top-p 0.9, 128 tokens; ``target_generation``
    to greedy, 256 tokens.
    """
    # deferred: loads torch and transformers only when called
    from opct.attack.run import claim_attack_output

    # deferred: loads torch and transformers only when called
    from opct.attack.target import HFTarget

    # deferred: loads torch and transformers only when called
    from opct.models import load_for_inference, weights_fingerprint

    a_gen = attacker_generation or GenerationConfig(temperature=0.9, top_p=0.9, max_new_tokens=128)
    t_gen = target_generation or GenerationConfig(max_new_tokens=256)
    identity = {
        "attacker_model": attacker_spec,
        "model": target_spec,
        "behaviors_hash": hash_records([b.__dict__ for b in behaviors]),
        "episodes": episodes,
        "rounds": rounds,
        "judge": judge,
        "sampling": {**a_gen.model_dump(exclude={"sequences_per_call"}), "seed": seed},
        "generation": t_gen.model_dump(exclude={"sequences_per_call"}),
    }
    check_output(out_dir, "attack", "--out")  # another model's attack, a run, an eval...: refused before loading
    a_model, a_tok = load_for_inference(attacker_spec)
    t_model, t_tok = (a_model, a_tok) if target_spec == attacker_spec else load_for_inference(target_spec)
    identity["weights_sha256"] = weights_fingerprint(t_model)
    identity["attacker_weights_sha256"] = weights_fingerprint(a_model)
    with output_lock(out_dir, "this attack"):
        claim_attack_output(out_dir, identity)  # refuses another attack's folder; this one's is measured again
        write_json_atomic(out_dir / "manifest.json", build_manifest("attack", identity, weights_sha256=identity["weights_sha256"]))
        attacker = HFAttacker(a_model, a_tok, prompt, a_gen, seed)
        target = HFTarget(t_model, t_tok, t_gen)
        runner = ModelAttackRunner(attacker, target, scorer, episodes=episodes, rounds=rounds, threshold=threshold)
        outcomes = runner.run(behaviors, progress=progress)
        info = {**identity, "attacker": "model", "threshold": threshold, "budget": episodes * rounds}
        return write_attack_results(outcomes, out_dir, info)


def organism_model_attack(attacker_spec: str, out_dir: Path, target_spec: str = "organism", split: str = "heldout",
                          judge: str = "organism", **settings: Any) -> Path:
    """The organism (or a GRPO-trained organism attacker) attacking ``target_spec`` on the organism's ``split`` behaviours."""
    return model_attack(attacker_spec, target_spec, organism_behaviors(split), organism_rewrite_prompt(), make_scorer(judge), out_dir,
                        judge=judge, **settings)


def real_model_attack(attacker_spec: str, target_spec: str, behaviors_path: str, out_dir: Path, judge: str = "rule",
                      judge_options: Any = None, **settings: Any) -> Path:
    """A real attacker model (PAIR-style red-team prompt) against a real target on a behaviours file;
    ``judge_options`` (:class:`opct.judges.JudgeOptions`) set a served judge's timeout, retries and fail-fast."""
    behaviors = behaviors_from_file(behaviors_path)
    return model_attack(attacker_spec, target_spec, behaviors, RedTeamPrompt(), make_scorer(judge, judge_options), out_dir,
                        judge=judge, **settings)


class ModelAttack:
    """The ``model`` attacker (:data:`opct.attack.attackers.ATTACKERS`): a model (the organism, a folder or
    a ``grpo_attack`` run) rewrites each behaviour for ``episodes`` x ``rounds`` queries."""

    name = "model"

    def check(self, config: Any) -> None:
        """An attacker model, episodes and rounds of at least 1, a reachable threshold, no loading options."""
        if config.attacker is None:
            raise ValueError("--strategy model needs --attacker MODEL ('organism', a model folder or a grpo_attack run)")
        if config.episodes < 1 or config.rounds < 1 or not 0.0 < config.threshold <= 1.0:
            raise ValueError(f"--episodes and --rounds must be at least 1 and --threshold in (0, 1]; got "
                             f"episodes={config.episodes}, rounds={config.rounds}, threshold={config.threshold}")
        if config.search or config.target is not None:
            raise ValueError("a model attacker takes no search settings and no whole target spec (they are the search "
                             "attacker's)")
        if unused := config.loading_options_given():
            raise ValueError(f"--attacker loads both models with their own settings; {', '.join(unused)} apply to the "
                             "search attacker only")

    def rounds(self, config: Any) -> int:
        """The rounds of one episode."""
        return config.rounds

    def run(self, config: Any, progress: Callable[[int, int], None] | None = None) -> Path:
        """``config.attacker`` attacking ``config.model``; the ``results.json`` written."""
        settings = {"episodes": config.episodes, "rounds": config.rounds, "threshold": config.threshold,
                    "seed": config.seed, "target_generation": config.target_generation(), "progress": progress}
        if config.data == "organism":
            return organism_model_attack(config.attacker, config.out, config.model, config.split, **settings)
        return real_model_attack(config.attacker, config.model, config.behaviors, config.out, config.judge,
                                 config.judge_options(), **settings)
