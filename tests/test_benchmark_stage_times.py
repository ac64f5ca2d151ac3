"""benchmarks/stage_times.py: the stage seconds that docs/mechanism.md's time tables quote, from the logs."""

from __future__ import annotations

from script_loader import ROOT, load_script

stage_times = load_script("benchmarks/stage_times.py")

WRAPPED_LOG = """start 2026-11-29T05:53:01 w4-long.qwen3 c9674e5
 train:bct-00-s0 started (pid 1; log
runs/x/stages/train
-bct-00-s0.log)
 train:bct-00-s0 done (197 s; log runs/x/stages/train-bct-00-s0.log)
 train:opct-03-s1 done
(401 s; log runs/x)
 eval:bct-s2 done (35 s)
rc=0 wall_seconds 640 end 2026-11-29T06:04:01
"""


def test_a_wrapped_log_gives_each_stage_once_with_seeds_and_candidates_pooled():
    result = stage_times.summary(WRAPPED_LOG)
    assert [(r["stage"], r["n"], r["total_s"]) for r in result["rows"]] == [
        ("eval:bct", 1, 35), ("train:bct", 1, 197), ("train:opct", 1, 401)]
    assert result["stage_seconds"] == 633 and result["wall_seconds"] == 640
    by_candidate = stage_times.stage_seconds(WRAPPED_LOG, by="candidate")
    assert by_candidate == {"train:bct-00": [197], "train:opct-03": [401], "eval:bct": [35]}


def test_a_stage_a_rerun_finished_again_counts_once_with_its_attempts_added():
    log = WRAPPED_LOG + "start (rerun)\n train:bct-00-s0 done (6 s; 1 of 3)\n train:opct-03-s1 done (250 s)\n"
    result = stage_times.summary(log)
    assert [(r["stage"], r["n"], r["total_s"]) for r in result["rows"]] == [
        ("eval:bct", 1, 35), ("train:bct", 1, 203), ("train:opct", 1, 651)]
    assert result["repeated"] == ["train:bct-00-s0", "train:opct-03-s1"]
    assert "stages done more than once (their attempts summed): 2" in stage_times.render(result)
    assert stage_times.summary(WRAPPED_LOG)["repeated"] == []


def test_a_whole_studys_log_keeps_each_familys_stages_apart():
    log = ("family w1-short.llama: organism-llama -> runs/x\n[stage] train:bct-s0 done (40 s; 1 of 2)\n"
           "[stage] train:bct-s1 done (44 s; 2 of 2)\nfamily w4-long.llama: organism-llama-w4-long -> \nruns/y\n"
           "[stage] train:bct-s0 done\n(200 s; 1 of 2)\n== part 2\nfamily w4-long.llama: organism-llama-w4-long ->\n"
           "[stage] train:bct-s1 done (190 s; 2 of 2)\n(family_transfer rule)\n")
    assert stage_times.attempts(log) == {"w1-short.llama/train:bct-s0": [40], "w1-short.llama/train:bct-s1": [44],
                                         "w4-long.llama/train:bct-s0": [200], "w4-long.llama/train:bct-s1": [190]}
    assert stage_times.stage_seconds(log, by="family") == {"w1-short.llama/train:bct": [40, 44],
                                                           "w4-long.llama/train:bct": [200, 190]}
    result = stage_times.summary(log)
    assert [(r["stage"], r["n"], r["total_s"]) for r in result["rows"]] == [("train:bct", 4, 474)]
    assert result["repeated"] == []  # the same stage name in two families is two stages
    assert "w4-long.llama/train:bct " in stage_times.render(stage_times.summary(log, by="family"))


def test_an_unfinished_log_has_no_wall_time_and_an_empty_one_is_an_error(tmp_path, capsys):
    assert stage_times.wall_seconds("train:bct-00-s0 done (3 s)") is None
    empty = tmp_path / "empty.log"
    empty.write_text("start\n")
    assert stage_times.main([str(empty)]) == 1
    assert "--jobs" in capsys.readouterr().err
    assert stage_times.main([str(tmp_path / "missing.log")]) == 2


def test_the_committed_selection_log_gives_the_times_docs_mechanism_quotes():
    # docs/mechanism.md, "Third level family selected: w1-short.qwen3": 32 candidate runs (8 candidates per
    # method, seeds 0 and 1), a candidate's mean run 178.5-207.5 s for BCT and 384.0-432.5 s for OPCT, single runs
    # 163-219 s and 339-486 s, 99.9 min (5,991 s) of wall time.
    log = (ROOT / "benchmarks/results/mechanism/selection-w1-short.qwen3.time.txt").read_text()
    groups = stage_times.stage_seconds(log)
    assert {k: len(v) for k, v in groups.items()} == {"train:bct": 16, "train:opct": 16}
    assert (min(groups["train:bct"]), max(groups["train:bct"])) == (163, 219)
    assert (min(groups["train:opct"]), max(groups["train:opct"])) == (339, 486)
    candidates = stage_times.stage_seconds(log, by="candidate")
    means = {k: sum(v) / len(v) for k, v in candidates.items()}
    assert len(means) == 16 and all(len(v) == 2 for v in candidates.values())
    for method, extremes in (("bct", (178.5, 207.5)), ("opct", (384.0, 432.5))):
        of_method = [m for k, m in means.items() if k.startswith(f"train:{method}-")]
        assert (min(of_method), max(of_method)) == extremes
    assert stage_times.wall_seconds(log) == 5991
    docs = " ".join((ROOT / "docs/mechanism.md").read_text().split())
    assert "a candidate's run 178.5–207.5 s for BCT and 384.0–432.5 s for OPCT on average over its two seeds" in docs
    assert "(single runs 163–219 s and 339–486 s;" in docs
