"""Issue 17, a conventional command line: --version, opct env, --threads and --no-progress on every
command that runs a model, usage errors that exit 2, and help that names values like a Unix tool."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from opct.cli.main import app

#: The commands that load and run a model.
MODEL_COMMANDS = ("train", "eval", "attack", "run", "demo")
#: Typer's Python-type labels (``<list[str]>``, ``<str>``, ``<bool>``), not the ``<think>`` of a help text.
TYPE_LABEL = re.compile(r"<(?:list\[[^\]]*\]|str|int|float|bool|path|Path|dir|file)>")


def _invoke(args: list[str], **kwargs):
    return CliRunner().invoke(app, args, terminal_width=200, **kwargs)


def _all_command_paths() -> list[list[str]]:
    """Every command and subcommand of ``opct`` as its argument path (``[]`` is ``opct`` itself)."""
    import typer.main

    def walk(command, path):
        yield path
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, [*path, name])

    return list(walk(typer.main.get_command(app), []))


def test_version_prints_the_package_version():
    from importlib import metadata

    res = _invoke(["--version"])
    assert res.exit_code == 0, res.output
    assert res.output == f"opct {metadata.version('opct')}\n"


def test_env_names_versions_devices_and_variables(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OPCT_SHARED_DATA", "/data/shared")
    monkeypatch.setenv("OPCT_JUDGE_API_KEY", "sk-very-secret")
    res = _invoke(["env"])
    assert res.exit_code == 0, res.output
    lines = dict(line.split(":", 1) for line in res.output.splitlines())
    for key in ("opct", "python", "torch", "transformers", "peft", "accelerate", "datasets", "safetensors", "cuda", "mps", "cpu"):
        assert key in lines, key
    assert lines["torch"].strip() == torch.__version__
    assert f"{torch.get_num_threads()} threads" in lines["cpu"]
    assert lines["HF_HUB_OFFLINE"].strip() == "1" and lines["OPCT_SHARED_DATA"].strip() == "/data/shared"
    assert lines["OPCT_JUDGE_API_KEY"].strip() == "(set, hidden)" and "sk-very-secret" not in res.output


def test_env_json_parses(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    res = _invoke(["env", "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert set(info) == {"opct", "python", "platform", "packages", "devices", "env"}
    assert info["packages"]["torch"] == torch.__version__
    assert info["devices"]["cuda_available"] == torch.cuda.is_available()
    assert info["devices"]["cpu_count"] >= 1 and info["env"]["HF_TOKEN"] == "(set, hidden)"


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_model_commands_take_threads_and_no_progress(command):
    res = _invoke([command, "--help"])
    assert res.exit_code == 0, res.output
    assert "--threads" in res.output and "--no-progress" in res.output and "OPCT_THREADS" in res.output


@pytest.mark.parametrize("args", [
    ["train", "--config", "./nope.yaml"],
    ["eval", "--model", "./nope"],
    ["attack", "--model", "./nope"],
    ["run", "./nope.yaml"],
])
def test_threads_and_no_progress_parse_then_the_missing_input_exits_2(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = _invoke([*args, "--threads", "1", "--no-progress"])
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error:") and "nope" in res.output


def test_demo_dry_run_takes_threads_and_no_progress():
    res = _invoke(["demo", "--dry-run", "--threads", "1", "--no-progress"])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("bad", [["eval", "--threads", "0"], ["attack", "--threads", "x"], ["eval", "--no-such-flag"]])
def test_a_usage_error_exits_2_with_the_usage_line(bad):
    res = _invoke(bad)
    assert res.exit_code == 2, res.output
    assert "Usage: " in res.output and "internal error" not in res.output


def test_threads_reach_torch_before_the_model_loads(tmp_path, monkeypatch):
    """--threads N (or OPCT_THREADS) calls torch.set_num_threads(N) before any model work."""
    calls: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 99)
    monkeypatch.chdir(tmp_path)
    assert _invoke(["eval", "--model", "./nope", "--threads", "3"]).exit_code == 2
    assert _invoke(["attack", "--model", "./nope"], env={"OPCT_THREADS": "5"}).exit_code == 2
    assert calls == [3, 5]


def test_without_threads_torch_keeps_its_default_unless_the_measured_default_differs(monkeypatch):
    from opct.cli import boundary as cli_common

    calls: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr(cli_common, "available_cores", lambda: torch.get_num_threads())  # no CPU quota below it
    cli_common.apply_threads(None)
    expected = [] if cli_common.DEFAULT_THREADS in (None, torch.get_num_threads()) else [cli_common.DEFAULT_THREADS]
    assert calls == expected
    cli_common.apply_threads(torch.get_num_threads())  # already so: nothing to change
    assert calls == expected


def test_attack_prints_none_cracked_instead_of_a_median_of_none():
    from opct.cli.attack import attack_summary, cracked_text

    assert cracked_text({"n_cracked": 0, "median": None}) == "none cracked"
    assert cracked_text({"n_cracked": 3, "median": 7.0}) == "cracked 3 (median 7 queries)"
    assert cracked_text({"n_cracked": 2, "median": 13.5}) == "cracked 2 (median 13.5 queries)"
    res = {"n": 4, "metrics": {"dsr": {"value": 1.0, "ci_low": 0.51, "ci_high": 1.0, "n": 4}},
           "queries_to_crack": {"n_cracked": 0, "median": None, "total_queries": 96}}
    line = attack_summary(res, Path("runs/attack"))[0]
    assert "none cracked" in line and "None" not in line and "96 queries in all" in line


def _fake_results(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(json.dumps({"n": 2, "status": "ok", "metrics": {"dsr": {"value": 1.0, "ci_low": 0.34, "ci_high": 1.0, "n": 2}},
                                "queries_to_crack": {"n_cracked": 0, "median": None, "total_queries": 6}}))
    return path


@pytest.mark.parametrize("no_progress", [False, True])
def test_attack_reports_rounds_to_a_progress_bar_unless_no_progress(no_progress, tmp_path, monkeypatch):
    import opct.attack.run

    seen: dict[str, object] = {}

    def fake_attack(spec, out, split, config, progress=None, **options):
        seen["progress"] = progress
        for r in range(config.budget):
            if progress is not None:
                progress(r + 1, config.budget)
        return _fake_results(out)

    monkeypatch.setattr(opct.attack.run, "organism_attack", fake_attack)
    res = _invoke(["attack", "--budget", "3", "--out", str(tmp_path / "a"), *(["--no-progress"] if no_progress else [])])
    assert res.exit_code == 0, res.output
    assert (seen["progress"] is None) == no_progress
    assert "none cracked" in res.output and "median None" not in res.output
    assert ("attack organism (rounds)" in res.output) != no_progress


def test_rounds_progress_yields_a_callback_only_when_enabled():
    from opct.attack.experiment_stage import rounds_progress

    with rounds_progress(False, "x", 3) as progress:
        assert progress is None
    with rounds_progress(True, "x", 3) as progress:
        for r in range(3):
            progress(r + 1, 3)


def test_attack_settings_of_the_search_target_are_refused_with_a_model_attacker(tmp_path):
    res = _invoke(["attack", "--attacker", "organism", "--revision", "v1", "--out", str(tmp_path / "a")])
    assert res.exit_code == 2 and "--revision" in res.output and not (tmp_path / "a").exists()


def test_help_names_values_conventionally():
    for path in _all_command_paths():
        res = _invoke([*path, "--help"])
        assert res.exit_code == 0, (path, res.output)
        assert not TYPE_LABEL.search(res.output), (path, TYPE_LABEL.findall(res.output))
    for command in ("train", "run", "demo", "eval"):
        assert re.search(r"--set\s+KEY=VALUE", _invoke([command, "--help"]).output), command
    train = _invoke(["train", "--help"]).output
    assert re.search(r"--config\s+-c\s+FILE", train) and re.search(r"--threads\s+N", train)
    assert re.search(r"--no-progress\s+Hide the progress bar", train)  # a flag takes no value
    validate = _invoke(["pairs", "validate", "--help"]).output
    assert re.search(r"--column\s+FIELD=COLUMN", validate) and re.search(r"files\.\.\.\s+PATH", validate)
    assert re.search(r"--extra\s+KEY=PATH", _invoke(["pairs", "build", "--help"]).output)


def test_eval_and_attack_take_the_model_spec_flags():
    for command in ("eval", "attack"):
        out = _invoke([command, "--help"]).output
        for flag in ("--device", "--dtype", "--revision", "--trust-remote-code", "--chat-template", "--system-prompt"):
            assert flag in out, (command, flag)


def test_revision_reaches_the_model_and_tokenizer(monkeypatch):
    """``--revision`` used to be accepted by ``opct eval`` and dropped before loading."""
    import opct.models.inference as models  # the module whose load_spec_for_inference looks them up
    from opct.config import ModelConfig

    seen: dict[str, object] = {}

    class Loaded:
        def eval(self):
            return self

    def fake_model(cfg, device=None):
        seen["model"] = cfg.revision
        return Loaded()

    def fake_tokenizer(name, chat_template=None, revision=None, trust_remote_code=False):
        seen["tokenizer"] = revision
        raise RuntimeError("stop here")

    monkeypatch.setattr(models, "load_model", fake_model)
    monkeypatch.setattr(models, "load_tokenizer", fake_tokenizer)
    with pytest.raises(RuntimeError, match="stop here"):
        models.load_spec_for_inference(ModelConfig(name_or_path="some-org/some-model", revision="abc123", device="cpu"))
    assert seen == {"model": "abc123", "tokenizer": "abc123"}


def test_the_threads_config_key_applies_and_the_flag_overrides_it(tmp_path, monkeypatch):
    """``threads:`` in an eval config sets torch's threads; --threads / OPCT_THREADS win over it."""
    calls: list[int] = []
    monkeypatch.delenv("OPCT_THREADS", raising=False)  # the caller's own setting would win over the config
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 99)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "eval.yaml").write_text("model: ./nope\nthreads: 2\n")
    assert _invoke(["eval", "--config", "eval.yaml"]).exit_code == 2
    assert _invoke(["eval", "--config", "eval.yaml", "--threads", "3"]).exit_code == 2
    assert _invoke(["eval", "--config", "eval.yaml"], env={"OPCT_THREADS": "4"}).exit_code == 2
    assert calls == [2, 3, 4]
    assert _invoke(["eval", "--config", "eval.yaml", "--set", "threads=0"]).exit_code == 2  # validated: > 0


def test_threads_is_a_run_key_that_never_makes_another_run(tmp_path):
    """A run (finished or not) resumes with other ``threads``; any other key of a finished run is refused."""
    import json

    from opct.config import RunConfig, dump_config
    from opct.runs.errors import RunDirError
    from opct.runs.resume import check_resumable

    cfg = RunConfig.model_validate({"train": {"max_steps": 2}, "threads": 1})
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"config": dump_config(cfg), "num_pairs": 4, "teacher_fingerprint": "t", "data_hash": "d"}))
    other = RunConfig.model_validate({"train": {"max_steps": 2}, "threads": 2})
    assert check_resumable(tmp_path, other, "t", "d", done=2, steps=2) is True  # finished: nothing to do
    assert check_resumable(tmp_path, other, "t", "d", done=1, steps=2) is False  # resumes
    changed = RunConfig.model_validate({"train": {"max_steps": 2}, "seed": 5})
    with pytest.raises(RunDirError, match="seed"):
        check_resumable(tmp_path, changed, "t", "d", done=2, steps=2)


def test_attack_judge_flags_reach_the_served_judge(tmp_path, monkeypatch):
    """--judge-timeout/--judge-retries/--judge-fail-after configure the attack's http: judge as they do eval's."""
    import json

    from opct.attack import run as attack_run
    from opct.judges import JudgeOptions

    seen: dict = {}

    def fake_real_attack(spec, behaviors, out, wrappers, judge, config, limit=None, judge_options=None, **options):
        seen.update(judge=judge, options=judge_options)
        path = tmp_path / "attack.json"
        path.write_text(json.dumps({"status": "ok", "n_behaviors": 0}))
        return path

    monkeypatch.setattr(attack_run, "real_attack", fake_real_attack)
    (tmp_path / "b.txt").write_text("do a bad thing\n")
    res = _invoke(["attack", "--model", "organism", "--data", "real", "--behaviors", str(tmp_path / "b.txt"),
                   "--judge", "http:judge-model", "--judge-timeout", "2.5", "--judge-retries", "0",
                   "--judge-fail-after", "1", "--out", str(tmp_path / "out"), "--no-progress"])
    assert seen, res.output
    assert seen["judge"] == "http:judge-model"
    assert seen["options"] == JudgeOptions(timeout=2.5, max_retries=0, fail_after=1)
    assert _invoke(["attack", "--judge-retries", "-1"]).exit_code == 2


def test_a_run_from_before_a_new_key_resumes_when_the_key_is_at_its_default(tmp_path):
    """Keys added to the configuration since a run started (absent from its manifest) are no change at
    their default; set to anything else they are."""
    import json

    from opct.config import RunConfig, dump_config
    from opct.runs.errors import RunDirError
    from opct.runs.resume import check_resumable

    cfg = RunConfig.model_validate({"train": {"max_steps": 2}})
    old = dump_config(cfg)
    del old["threads"], old["train"]["merged_lora_sampling"]  # as an earlier opct wrote it
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"config": old, "num_pairs": 4, "teacher_fingerprint": "t", "data_hash": "d"}))
    assert check_resumable(tmp_path, cfg, "t", "d", done=1, steps=2) is False  # resumes
    assert check_resumable(tmp_path, cfg, "t", "d", done=2, steps=2) is True  # finished, unchanged
    merged = RunConfig.model_validate({"train": {"max_steps": 2, "merged_lora_sampling": True}})
    with pytest.raises(RunDirError, match="merged_lora_sampling"):
        check_resumable(tmp_path, merged, "t", "d", done=1, steps=2)


def _raw_help_texts() -> list[tuple[list[str], str]]:
    """Every command's and parameter's help as written in the source (before the CLI tidies it)."""
    import typer.main

    found: list[tuple[list[str], str]] = []

    def walk(command, path):
        if command.help:
            found.append((path, command.help))
        found.extend((path, p.help) for p in command.params  # a hidden option, like a hidden command, prints nothing
                     if getattr(p, "help", None) and not getattr(p, "hidden", False))
        for name, sub in getattr(command, "commands", {}).items():
            if not sub.hidden:
                walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def test_every_help_text_prints_as_written_brackets_included():
    """Rich markup swallowed ``[base,bct,opct,act]`` from ``opct demo --help``, and a docstring's second
    paragraph kept its source line breaks mid-sentence: every help text now prints whole, each paragraph
    on one line (a terminal wide enough that nothing wraps)."""
    texts = _raw_help_texts()
    assert any("[base,bct,opct,act]" in text for _, text in texts)  # the text that went missing
    assert sum("[" in text for _, text in texts) >= 2
    rendered: dict[tuple[str, ...], str] = {}
    for path, text in texts:
        if tuple(path) not in rendered:
            res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "3000", "NO_COLOR": "1", "TERM": "dumb"})
            assert res.exit_code == 0, (path, res.output)
            rendered[tuple(path)] = res.output
        out = rendered[tuple(path)]
        lines = [" ".join(line.replace("│", " ").split()) for line in out.splitlines()]
        for paragraph in text.split("\n\n"):
            words = " ".join(paragraph.split())
            assert any(words in line for line in lines), (path, words)


def test_threads_help_is_one_line_and_the_measurements_are_in_the_docs():
    from opct.cli.boundary import Threads

    help_text = Threads.__metadata__[0].help
    assert len(help_text) < 200 and "x faster" not in help_text and "CPU threads" in help_text
    development = (Path(__file__).parents[1] / "docs" / "development.md").read_text(encoding="utf-8")
    assert "### CPU threads" in development and "benchmarks/threads.py" in development
