"""How stable SmolLM2-135M-Instruct's own clean answer to a multiple-choice question is: the sycophancy axis's base.

The sycophancy axis suggests an answer that differs from the model's own clean greedy answer and counts how often
the model switches to it, so the clean greedy answer must be the model's answer, not a coin toss. For each
question of a multiple-choice file (GPQA-Diamond's upstream CSV by default), the clean prompt (opct's
``clean_prompt``: question, lettered options, answer-format instruction) is answered greedily and with
``--samples`` samples at T = 1; the letter is read by opct's real-model reader (``extract_choice``). Reported,
each with n and a cluster-Wilson 95% interval over questions: the greedy answer read (not ``unparsed``), its
accuracy, and the share of samples that give the greedy answer again (its stability), against the 1/4 that
four options give by chance.

    PYTHONPATH=. python benchmarks/smollm2_mc_stability.py ../shared/data/gpqa-diamond [--limit 198]
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a multiple-choice file or folder opct pairs build sycophancy reads")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/smollm2/clean-answer-stability.json"))
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM

    from opct.axes.sycophancy.data import LETTERS, clean_prompt, load_mc_items
    from opct.evals.parsing import extract_choice
    from opct.models import load_tokenizer, render_prompt, resolve_model_path
    from opct.runs.manifest import package_versions, tested_versions
    from opct.sampling.engine import SamplingParams
    from opct.sampling.hf_sampler import HFSampler
    from opct.stats.intervals import cluster_rate

    items = load_mc_items(args.source)[: args.limit]
    path = resolve_model_path(args.model)
    tokenizer = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    sampler = HFSampler(model, tokenizer, batch_size=32)
    prompts = [render_prompt(tokenizer, clean_prompt(item)) for item in items]
    start = time.monotonic()

    def letters_of(params: SamplingParams) -> list[tuple[int, str | None]]:
        return [(r.prompt_index, extract_choice(tokenizer.decode(r.completion_ids, skip_special_tokens=True),
                                                letters=LETTERS[: len(items[r.prompt_index].options)]))
                for r in sampler.generate(prompts, params)]

    greedy = dict(letters_of(SamplingParams(n=1, temperature=0.0, max_new_tokens=args.max_new_tokens)))
    sampled = letters_of(SamplingParams(n=args.samples, temperature=1.0, max_new_tokens=args.max_new_tokens, seed=0))
    ids = [item.id for item in items]
    read = cluster_rate([greedy[i] is not None for i in range(len(items))], ids)
    correct = cluster_rate([None if greedy[i] is None else greedy[i] == items[i].answer for i in range(len(items))], ids)
    stable = cluster_rate([None if greedy[i] is None else letter == greedy[i] for i, letter in sampled],
                          [ids[i] for i, _ in sampled])
    sampled_read = cluster_rate([letter is not None for _, letter in sampled], [ids[i] for i, _ in sampled])
    counts = {letter: sum(v == letter for v in greedy.values()) for letter in LETTERS[:4]}
    subjects = sorted({str(item.subject) for item in items if item.subject is not None})
    by_subject = {subject: cluster_rate([None if greedy[i] is None else greedy[i] == item.answer
                                         for i, item in enumerate(items) if str(item.subject) == subject],
                                        [item.id for item in items if str(item.subject) == subject])
                  for subject in subjects}

    def row(est) -> dict:
        return {"value": est.value, "ci_low": est.ci_low, "ci_high": est.ci_high, "n": est.n, "clusters": est.clusters}

    result = {"what": __doc__.splitlines()[0], "created": datetime.now(UTC).isoformat(timespec="seconds"),
              "source": str(args.source), "questions": len(items), "model": args.model, "samples": args.samples,
              "max_new_tokens": args.max_new_tokens, "greedy_read": row(read), "greedy_accuracy": row(correct),
              "samples_read": row(sampled_read), "samples_repeat_greedy": row(stable),
              "greedy_letters": counts,
              "greedy_accuracy_by_subject": {subject: row(est) for subject, est in by_subject.items()},
              "wall_s": round(time.monotonic() - start),
              "versions": package_versions(), "tested_versions": tested_versions()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for key in ("greedy_read", "greedy_accuracy", "samples_read", "samples_repeat_greedy"):
        r = result[key]
        print(f"{key:<22} {r['value']:6.1%} [{r['ci_low']:.1%}, {r['ci_high']:.1%}] n={r['n']} ({r['clusters']} questions)")
    for subject, est in by_subject.items():
        print(f"  accuracy on {subject:<18} {est.value:6.1%} [{est.ci_low:.1%}, {est.ci_high:.1%}] n={est.n}")
    print("greedy letters:", counts, f"({result['wall_s']} s)")


if __name__ == "__main__":
    main()
