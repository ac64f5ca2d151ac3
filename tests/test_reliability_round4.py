"""Issue 61's weak items: study and experiment files' referenced selections, impossible records, ``opct model
tiny``'s tokenizer, ``pairs build``'s columns, trackers checked first, ``--print-config``, ``opct-lab select``'s
candidates, and the also-noted grammar, duplicate warnings, ``levels:`` errors and a late SIGTERM."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, run_config
from report_fixtures import write
from typer.testing import CliRunner

from opct.cli.main import app
from opct.config import ConfigError
from opct_lab.study.config import load_study

EXPERIMENTS = REPO / "opct" / "experiments"
STUDIES = REPO / "lab" / "opct_lab" / "studies"  # the lab's study files
MECHANISM = STUDIES / "organism_mechanism.yaml"
TOKENIZERS = REPO.parent / "shared" / "models"
needs_tokenizers = pytest.mark.skipif(not (TOKENIZERS / "gpt2-tokenizer").exists(), reason="needs ../shared/models")


# --------------------------------------------------------------------------- 5, 6: referenced files


def _study(tmp_path: Path, selection: str) -> Path:
    """A study file in ``tmp_path/study/`` that extends the shipped full demo, with family ``fa``'s picks in ``selection``."""
    folder = tmp_path / "study"
    folder.mkdir(exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump({"extends": str(STUDIES / "organism_demo_full.yaml"), "name": "s",
                                    "families": {"fa": "organism"}, "family_picks": {"fa": {"selection": selection}}}))
    return path


def test_a_missing_selection_names_the_study_the_field_and_the_file(tmp_path: Path) -> None:
    study = _study(tmp_path, "nosuch.json")
    with pytest.raises(ConfigError) as caught:
        load_study(study)
    assert str(caught.value).startswith(f"{study}: family_picks.fa.selection: {study.parent / 'nosuch.json'} does not exist")


def test_a_truncated_selection_names_the_study_the_field_and_the_file(tmp_path: Path) -> None:
    study = _study(tmp_path, "cut.json")
    (study.parent / "cut.json").write_text('{\n  "method_settings": {\n    "teacher_kl": {\n      "opct": {"optim": {"lr": "0.0')
    res = CliRunner().invoke(app, ["run", str(study), "--dry-run"], terminal_width=300)
    assert res.exit_code == 2, res.output
    assert f"{study}: family_picks.fa.selection: {study.parent / 'cut.json'} is not valid JSON (Unterminated" in res.output


def test_a_selection_outside_the_studys_folder_is_never_opened(tmp_path: Path) -> None:
    study = _study(tmp_path, "../../../../etc/passwd")
    with pytest.raises(ConfigError, match=r"family_picks\.fa\.selection: \.\./\.\./\.\./\.\./etc/passwd leads outside"):
        load_study(study)
    inside = json.loads((EXPERIMENTS / "organism_selection.json").read_text())
    write(tmp_path / "elsewhere" / "sel.json", inside)  # elsewhere, by an absolute path: on purpose
    assert load_study(_study(tmp_path, str(tmp_path / "elsewhere" / "sel.json"))).family_picks["fa"].selection


def test_an_experiments_truncated_selection_fails_the_dry_run(tmp_path: Path) -> None:
    (tmp_path / "sel.json").write_text('{"method_settings": {"teacher_kl": {')
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({"extends": str(EXPERIMENTS / "organism_demo.yaml"), "name": "e", "selection": "sel.json"}))
    res = CliRunner().invoke(app, ["run", str(exp), "--dry-run"], terminal_width=300)
    assert res.exit_code == 2, res.output
    assert f"{exp}: selection: {tmp_path / 'sel.json'} is not valid JSON" in res.output


# --------------------------------------------------------------------------- 7: impossible records


def test_an_n_above_the_records_is_invalid_in_the_main_table_too(tmp_path: Path) -> None:
    from opct.report import load_experiment
    from opct.report.table import build_table
    from opct.testing.synthetic_experiment import make_experiment

    exp = make_experiment(tmp_path / "exp", samples=True)
    path = exp / "eval" / "opct" / "sycophancy" / "results.json"
    data = json.loads(path.read_text())
    data["n_records"] = 99999
    data["metrics"]["sycophancy_rate"]["n"] = 99999
    write(path, data)
    table = build_table(load_experiment(exp))
    cell = table.cell("opct", next(c for c in table.columns if c.key == "sycophancy"))
    assert cell.startswith("invalid: n=99999 does not fit the 480 record(s)"), cell


# --------------------------------------------------------------------------- 8, 9: opct model tiny


def test_model_tiny_names_a_tokenizer_folder_that_does_not_exist(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["model", "tiny", "t", "--tokenizer", "./nope-tokenizer"])
    assert res.exit_code == 2 and "--tokenizer ./nope-tokenizer does not exist" in res.output, res.output
    assert "tiny_config.json" not in res.output and not (tmp_path / "t").exists()


@needs_tokenizers
def test_model_tiny_refuses_another_familys_tokenizer(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["model", "tiny", str(tmp_path / "t"), "--tokenizer", str(TOKENIZERS / "gpt2-tokenizer"),
                                   "--family", "qwen3"])
    assert res.exit_code == 2, res.output
    assert "is the gpt2 family's tokenizer, not the qwen3 family's" in res.output and "--family gpt2" in res.output
    assert not (tmp_path / "t").exists()


# --------------------------------------------------------------------------- 10: pairs build's columns


def test_pairs_build_names_a_question_column_that_does_not_exist(tmp_path: Path) -> None:
    rows = [{"question": f"Q{i}?", "choices": ["a", "b", "c"], "answer": "A", "id": f"q{i}"} for i in range(6)]
    source = tmp_path / "mc.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(app, ["pairs", "build", "sycophancy", str(source), "--out", str(tmp_path / "out"),
                                   "--question", "Nope"], terminal_width=300)
    assert res.exit_code == 2, res.output
    assert "Nope" in res.output and "column missing" in res.output and "--question" in res.output
    assert "cannot find the options" not in res.output


# --------------------------------------------------------------------------- 11: trackers first


def test_wandb_without_a_login_fails_before_anything_loads_or_is_written(tiny_model, pairs_file, tmp_path: Path,
                                                                         monkeypatch) -> None:
    for var in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "netrc").write_text("")
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    import opct.training.loop as loop

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the trackers were checked")

    monkeypatch.setattr(loop, "load_tokenizer", no_model)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(run_config(tiny_model, pairs_file, tmp_path / "out", **{"train.trackers": ["wandb"]})))
    res = CliRunner().invoke(app, ["train", "--no-progress", "-c", str(cfg)])
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: train.trackers: wandb has no login") and "WANDB_MODE=offline" in res.output
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- 13: --print-config


def test_print_config_refuses_a_misspelt_key_as_train_does() -> None:
    res = CliRunner().invoke(app, ["run", str(EXPERIMENTS / "organism_demo.yaml"), "--print-config",
                                   "--set", "train.optim.lrr=1"], terminal_width=300)
    assert res.exit_code == 2, res.output
    assert "optim.lrr: unknown key" in res.output and "lrr: 1" not in res.output


# --------------------------------------------------------------------------- 14: selection candidates


def _candidates(tmp_path: Path):
    from opct_lab.selection.run import candidate_configs, load_selection

    tree = {"extends": str(EXPERIMENTS / "organism_demo.yaml"), "name": "sel", "output_dir": str(tmp_path / "out"),
            "selection": {"steps": 2, "every": 2, "seeds": [0], "grid": {"bct": {"optim.lr": [1e-4]},
                                                                         "opct": {"optim.lr": [1e-3]}}}}
    path = tmp_path / "selection.yaml"
    path.write_text(yaml.safe_dump(tree))
    cfg = load_selection(path)
    runs = candidate_configs(cfg)
    for _cid, method, _, run in runs:
        run.run_dir.mkdir(parents=True)
        (run.run_dir / "manifest.json").write_text(json.dumps({"method": method}))
        rows = [{"step": 0, "val_teacher_kl": 0.5, "val_good": 0.2, "val_cap/capability_mc": 1.0},
                {"step": 2, "val_teacher_kl": 0.3, "val_good": 0.5, "val_cap/capability_mc": 1.0}]
        (run.run_dir / "metrics.jsonl").write_text(json.dumps({"step": 2, "completion_tokens": 10, "step_time_s": 1.0,
                                                               **{k: v for k, v in rows[1].items() if k != "step"}}) + "\n")
        (run.run_dir / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return cfg, runs


def test_a_cut_candidate_record_is_refused_naming_its_file_and_line(tmp_path: Path) -> None:
    from opct_lab.selection.candidates import CandidateDamagedError
    from opct_lab.selection.run import score_candidates

    cfg, runs = _candidates(tmp_path)
    path = runs[1][3].run_dir / "validation.jsonl"
    path.write_text(path.read_text()[:-20])
    with pytest.raises(CandidateDamagedError, match=rf"{path}, line 2 is not JSON \(cut or edited\).*delete"):
        score_candidates(cfg, attack=False)


@pytest.mark.parametrize(("field", "value", "why"), [
    ("val_teacher_kl", -5.0, "below 0"),
    ("val_good", 1.7, r"outside \[0, 1\]"),
])
def test_a_candidate_value_out_of_range_never_decides_the_pick(tmp_path: Path, field: str, value: float, why: str) -> None:
    from opct_lab.selection.candidates import CandidateDamagedError
    from opct_lab.selection.run import score_candidates

    cfg, runs = _candidates(tmp_path)
    for run in (runs[1][3].run_dir,):  # the hand edit, in both files so that they agree
        for name in ("validation.jsonl", "metrics.jsonl"):
            (run / name).write_text((run / name).read_text().replace(f'"{field}": 0.3' if field == "val_teacher_kl" else
                                                                     f'"{field}": 0.5', f'"{field}": {value}'))
    with pytest.raises(CandidateDamagedError, match=f"{field} is {value:g}, {why}"):
        score_candidates(cfg, attack=False)


def test_a_candidate_record_edited_apart_from_its_run_log_is_refused(tmp_path: Path) -> None:
    from opct_lab.selection.candidates import CandidateDamagedError
    from opct_lab.selection.run import score_candidates

    cfg, runs = _candidates(tmp_path)
    path = runs[0][3].run_dir / "validation.jsonl"
    path.write_text(path.read_text().replace('"val_teacher_kl": 0.3', '"val_teacher_kl": 0.01'))
    with pytest.raises(CandidateDamagedError, match="val_teacher_kl is 0.01, but the run's metrics.jsonl recorded 0.3"):
        score_candidates(cfg, attack=False)


# --------------------------------------------------------------------------- also noted


def test_one_failed_request_is_counted_in_the_singular() -> None:
    from opct.judges.chat_client import ChatCompletionsClient
    from opct.judges.model_judge import JudgeOutage

    client = ChatCompletionsClient("m", base_url="http://127.0.0.1:9/v1", fail_after=1)
    with pytest.raises(JudgeOutage, match="failed 1 request in a row"):
        client._failed("HTTP 500")


def test_an_output_of_another_kind_is_refused_with_an_article(tmp_path: Path) -> None:
    from opct.runs.outputs import OutputOwnedError, check_output

    write(tmp_path / "ev" / "manifest.json", {"kind": "eval", "weights_sha256": "abc"})
    with pytest.raises(OutputOwnedError, match="; an export never writes into"):
        check_output(tmp_path / "ev", "export", "--out")
    with pytest.raises(OutputOwnedError, match="; an attack never writes into"):
        check_output(tmp_path / "ev", "attack", "--out")


def test_one_warning_is_printed_once_however_many_places_raise_it(tmp_path: Path) -> None:
    """Python prints a warning once per place in the code; the same notice from three places (three runs of an
    experiment, say) printed three identical lines. Run as its own process: pytest records warnings itself."""
    script = tmp_path / "warn.py"
    script.write_text(
        "import warnings\n"
        "from opct.errors import OpctWarning\n"
        "from opct.quiet import quiet_output\n"
        "TEXT = 'train.epochs=3 is ignored: train.max_steps sets the length'\n"
        "with quiet_output():\n"
        "    warnings.warn(TEXT, OpctWarning)\n"
        "    warnings.warn(TEXT, OpctWarning)\n"
        "    for _ in range(3):\n"
        "        warnings.warn(TEXT, OpctWarning)\n"
        "    warnings.warn('another notice', OpctWarning)\n")
    done = subprocess.run([sys.executable, str(script)], env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("warning: train.epochs=3 is ignored") == 1, done.stderr
    assert done.stderr.count("warning: another notice") == 1


def test_a_levels_error_shows_the_levels_not_the_whole_configuration() -> None:
    with pytest.raises(ConfigError) as caught:
        load_study(MECHANISM, ["levels.w4-long=[w4-long.llama]"])
    message = str(caught.value)
    assert "levels: " in message and "w4-long.qwen3 is in no level" in message
    assert "method_settings" not in message and "seeds" not in message and len(message) < 600


def test_a_sigterm_after_the_command_finished_says_so(tmp_path: Path) -> None:
    """A command runs through the error boundary and ends (here ``model tiny``'s refusal); the process, still
    alive, then gets SIGTERM, as from a scheduler's late stop: one line saying so, exit 130, not a silent 143."""
    script = tmp_path / "late.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "from typer.testing import CliRunner\n"
        "from opct.cli.main import app\n"
        "res = CliRunner().invoke(app, ['model', 'tiny', 'x', '--tokenizer', './nope'])\n"
        "assert res.exit_code == 2, res.output\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(5)\n"
        "sys.exit(0)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert "interrupted while exiting: the command had finished and everything it wrote is kept" in done.stderr
    shutil.rmtree(tmp_path / "x", ignore_errors=True)
