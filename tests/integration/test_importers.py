"""The importers on logs written by the real tools (tests/data/imported: torchtitan and Megatron-LM on a GPU).

In process (typer's CliRunner). Expected numbers are read from the logs themselves with a plain regular expression
here, never copied from the importer's output; a log that must be wrong (another card, more ranks) is a real log
changed in memory, and the test says what it changed.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from honestscale.collector._sources import classify
from tests.conftest import REPO
from tests.importing import DATA
from tests.importing import ingest as _ingest
from tests.importing import lint as _lint
from tests.importing import log_text as _text
from tests.importing import query as _query
from tests.importing import run_cli as _cli
from tests.importing import runs as _runs

CONSOLE_R022 = DATA / "torchtitan-console-r022.log.gz"
CONSOLE_OBS = DATA / "torchtitan-console-obs.log.gz"
CONSOLE_SL = DATA / "torchtitan-console-sl.log.gz"
OBS = DATA / "torchtitan-obs"
SL = DATA / "torchtitan-sl"
MEGATRON = DATA / "megatron" / "megatron.log.gz"


def test_chosen_by_content_not_by_name(tmp_path: Path) -> None:
    """A torchtitan metrics file is .jsonl like an event file; a console log is named anything."""
    assert classify(OBS / "experiment_logs" / "trainer_rank_0_experiment.jsonl.gz") == "torchtitan-experiment"
    renamed = tmp_path / "events-rank0.jsonl"
    renamed.write_bytes(
        gzip.decompress((OBS / "experiment_logs" / "trainer_rank_0_experiment.jsonl.gz").read_bytes())
    )
    assert classify(renamed) == "torchtitan-experiment"
    assert classify(next((SL / "structured_logs").iterdir())) == "torchtitan-system"
    assert classify(CONSOLE_R022) == "torchtitan-console"
    assert classify(MEGATRON) == "megatron-log"
    slurm_out = tmp_path / "slurm-4242.out"
    slurm_out.write_text(_text(MEGATRON))
    assert classify(slurm_out) == "megatron-log"
    assert classify(REPO / "examples" / "digits-ddp" / next(iter(["README.md"]))) is None


def test_torchtitan_console_lands_with_its_claims_checked(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    out = _ingest(store, CONSOLE_R022)
    assert "read as torchtitan console log" in out
    text = _text(CONSOLE_R022, plain=True)
    params = int(re.search(r"size: ([\d,]+) total parameters", text).group(1).replace(",", ""))  # type: ignore[union-attr]
    steps = re.findall(r"step:\s+(\d+)\s+loss", text)
    (run,) = _runs(store)
    assert run["source"] == "torchtitan-console" and run["status"] == "success"
    assert run["accelerator"] == re.search(r"CUDA capacity: (.+?) with", text).group(1)  # type: ignore[union-attr]
    row = _query(
        store,
        f"SELECT params_total, sequence_length, attrs->>'claims' FROM runs WHERE run_id = '{run['run_id']}'",
    )
    assert row[0][0] == params and row[0][1] == 2048
    claims = json.loads(row[0][2])
    assert claims["peak_tflops"] == pytest.approx(989.0) and "palm" in claims["flops_convention"]
    counted = _query(store, "SELECT count(*), sum(tokens), count(*) FILTER (WHERE warmup) FROM steps")[0]
    assert counted == (len(steps), len(steps) * 8 * 2048, 1)
    # the tool's MFU, TFLOP/s and tokens/s agree with what its counts give (within HS107's 5 %): no such finding
    findings = _lint(store, "HS107")
    assert not [f for f in findings if "claimed" in f["message"] and f["outcome"] == "fail"], findings
    # HS215: a one-GPU run, its rank 0 is every rank
    assert not _lint(store, "HS215")


def test_a_wrong_peak_claim_fails_hs107(tmp_path: Path) -> None:
    """The same real console, its GPU renamed in memory to an A100 (peak 312 TFLOP/s bf16): torchtitan's MFU, divided
    by the H200's 989, is now far from what the A100's peak gives, and HS107 says so."""
    changed = tmp_path / "console-a100.log"
    changed.write_text(_text(CONSOLE_R022).replace("NVIDIA H200 with", "NVIDIA A100-SXM4-80GB with"))
    store = tmp_path / "s.duckdb"
    _ingest(store, changed)
    failed = [f for f in _lint(store, "HS107") if f["outcome"] == "fail" and "claimed MFU" in f["message"]]
    assert failed, _lint(store, "HS107")
    assert "vs recomputed" in failed[0]["message"]


def test_torchtitan_per_rank_jsonl_both_layouts(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    out = _ingest(store, OBS, SL)
    assert "read as torchtitan experiment metrics (per rank)" in out
    assert "read as torchtitan structured system log (per rank)" in out
    assert (
        "its spans are the experiment log's" in out
    )  # layout 1's system log is the same run, not a second one
    runs = {r["source"]: r for r in _runs(store)}
    assert set(runs) == {"torchtitan-experiment", "torchtitan-system"}
    exp = _text(OBS / "experiment_logs" / "trainer_rank_0_experiment.jsonl.gz").splitlines()
    step_s = [json.loads(x) for x in exp if '"trainer_time/step_s"' in x]
    got = _query(store, f"SELECT count(*), sum(t_total), count(t_data), count(t_compute), count(samples) FROM steps "
                        f"WHERE run_id = '{runs['torchtitan-experiment']['run_id']}'")[0]  # fmt: skip
    assert got[0] == len(step_s) and got[1] == pytest.approx(sum(x["sum"] / x["weight"] for x in step_s))
    assert got[2] == got[3] == len(step_s) and got[4] == 0  # phases timed; samples unknown, never 0
    layout2 = [json.loads(x) for x in _text(next((SL / "structured_logs").iterdir())).splitlines()]
    tokens = [x["value"] for x in layout2 if x.get("event_name") == "local_valid_tokens"]
    got = _query(store, f"SELECT count(*), sum(tokens), count(samples) FROM steps "
                        f"WHERE run_id = '{runs['torchtitan-system']['run_id']}'")[0]  # fmt: skip
    assert got == (len(tokens), sum(tokens), 0)
    assert runs["torchtitan-system"]["tokens_per_s"] and runs["torchtitan-system"]["samples_per_s"] is None
    # the JSONL files do not say how many ranks ran: HS215 cannot verify, and says what to record
    assert {f["outcome"] for f in _lint(store, "HS215")} == {"cannot_verify"}
    # ingesting again adds nothing
    code, again = _cli("ingest", str(OBS), str(SL), "--store", str(store))
    assert code == 0 and "0 events landed" in again


def test_megatron_log(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    out = _ingest(store, MEGATRON)
    assert "read as Megatron-LM training log" in out and "mean of [1, 4, 5] iterations" in out
    text = _text(MEGATRON)
    (run,) = _runs(store)
    assert (
        run["source"] == "megatron-log" and run["status"] == "success" and run["framework"] == "megatron-lm"
    )
    printed = int(re.search(r"model parallel rank \(0, 0, 0\): (\d+)", text).group(1))  # type: ignore[union-attr]
    consumed = [int(x) for x in re.findall(r"consumed samples:\s+(\d+)", text)]
    row = _query(store, "SELECT params_total, parallel, global_batch_size, sequence_length FROM runs")[0]
    assert row[0] == printed  # computed from the printed shape: equal to Megatron's own count at tp = pp = 1
    assert json.loads(row[1]) == {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "dp": 1} and row[2:] == (32, 1024)
    assert _query(store, "SELECT sum(samples), sum(tokens) FROM steps")[0] == (
        consumed[-1],
        consumed[-1] * 1024,
    )
    test_loss = float(re.search(r"on test set \| lm loss value: ([\d.E+-]+)", text).group(1))  # type: ignore[union-attr]
    assert run["final_accuracy"] == {"split": "test", "metric": "lm_loss", "value": pytest.approx(test_loss)}
    evals = _query(store, "SELECT split, count(*) FROM evals GROUP BY split ORDER BY split")
    assert evals == [
        ("test", 1),
        ("validation", len(re.findall(r"validation loss at iteration \d+ (?:on validation set )?\|", text))),
    ]
    # the accelerator is not in Megatron's log: no MFU (never another card's peak); its TFLOP/s count the logits
    # layer, which honestscale's conventions leave out: a claim of another convention, named as a likely cause
    hs107 = _lint(store, "HS107")
    assert [f["outcome"] for f in hs107 if "no peak" in f["message"] and "MFU" in f["message"]] == [
        "cannot_verify"
    ]
    (tflops,) = [f for f in hs107 if "convention honestscale does not compute" in f["message"]]
    assert tflops["outcome"] == "cannot_verify" and not [f for f in hs107 if "vs recomputed" in f["message"]]


def test_megatron_of_eight_ranks_read_from_one_rank_fails_hs215(tmp_path: Path) -> None:
    """The real log with its arguments block changed in memory to 8 data-parallel ranks (the printed lines are
    the last rank's either way)."""
    text = _text(MEGATRON)
    for arg in ("world_size", "data_parallel_size"):
        text = re.sub(rf"^(  {arg} \.+ )1$", r"\g<1>8", text, flags=re.MULTILINE)
    changed = tmp_path / "slurm-8ranks.out"
    changed.write_text(text)
    store = tmp_path / "s.duckdb"
    _ingest(store, changed)
    (finding,) = _lint(store, "HS215")
    assert (
        finding["outcome"] == "fail"
        and "8 ranks" in finding["message"]
        and "Megatron-LM: last" in finding["message"]
    )


def test_a_log_cut_short_is_a_run_without_a_stop(tmp_path: Path) -> None:
    """A killed (or still running) job: the real Megatron log up to its 50th iteration is a run without a stop
    (incomplete), never a success; the same log ending in a traceback is a failed run naming the exception."""
    text = _text(MEGATRON)
    cut = text[: text.index("iteration       55/")]
    log = tmp_path / "killed.log"
    log.write_text(cut.rsplit("\n", 1)[0] + "\n")
    store = tmp_path / "s.duckdb"
    out = _ingest(store, log)
    (run,) = _runs(store)
    assert run["status"] == "incomplete"
    assert "the log ends at iteration 50 of 100: the run is left without a stop" in out
    # the same log ending in the traceback of a crash (an exception line as Python prints it): a failed run
    log.write_text(cut.rsplit("\n", 1)[0] + "\nTraceback (most recent call last):\n  File \"pretrain_gpt.py\", "
                   "line 1, in <module>\ntorch.OutOfMemoryError: CUDA out of memory.\n")  # fmt: skip
    code, again = _cli("ingest", str(log), "--store", str(store))
    assert code == 0, again
    (run,) = _runs(store)
    assert run["status"] == "failed" and run["reason"] == (
        "the log ends in a traceback: OutOfMemoryError: CUDA out of memory."
    )
    # a traceback the run went on past (a logger's connection error before iteration 20) is not its end
    at = cut.index(" iteration       20/")
    recovered = tmp_path / "recovered.log"
    recovered.write_text(cut[: cut.rindex("\n", 0, at) + 1] + "Traceback (most recent call last):\n"
                         "ConnectionError: wandb unreachable\n" + cut[cut.rindex("\n", 0, at) + 1 :])  # fmt: skip
    other = tmp_path / "other.duckdb"
    _ingest(other, recovered)
    assert [r["status"] for r in _runs(other)] == ["incomplete"]


def test_console_and_copies(tmp_path: Path) -> None:
    """Every console layout lands; a copy of a log elsewhere is the same run (duplicates), not a second one."""
    store = tmp_path / "s.duckdb"
    out = _ingest(store, CONSOLE_R022, CONSOLE_OBS, CONSOLE_SL)
    assert out.count("read as torchtitan console log") == 3
    assert len(_runs(store)) == 3
    # three builds of torchtitan (0.2.2, the observability branch, main): what each log prints of its setup differs,
    # so one point of the three is a mix of configurations, and HS108 says so
    assert len({h for (h,) in _query(store, "SELECT config_hash FROM runs")}) == 3
    assert any(
        f["outcome"] == "fail" and "mixes 3 configurations" in f["message"] for f in _lint(store, "HS108")
    )
    copy = tmp_path / "elsewhere" / "job.log"
    copy.parent.mkdir()
    shutil.copy(MEGATRON, copy.with_suffix(".log.gz"))
    _ingest(store, MEGATRON)
    code, again = _cli("ingest", str(copy.with_suffix(".log.gz")), "--store", str(store))
    assert code == 0 and "duplicate events skipped" in again
    assert len(_runs(store)) == 4


HF = DATA / "hf-gpt2"


def test_hugging_face_trainer_state_against_the_recorder_of_the_same_training(tmp_path: Path) -> None:
    """trainer_state.json (process 0's) beside what honestscale's recorder wrote on both ranks of that training:
    the importer's global batch and evaluations agree with the recorder's; what the file lacks stays unknown."""
    store = tmp_path / "s.duckdb"
    out = _ingest(store, HF)
    assert "read as Hugging Face trainer_state.json" in out
    runs = {r["source"]: r for r in _runs(store)}
    imported, recorded = runs["hf-trainer-state"], runs["native"]
    assert (
        imported["status"] == "success"
        and imported["global_batch_size"] == recorded["global_batch_size"] == 16
    )
    assert recorded["n_accelerators"] == 0 and imported["n_accelerators"] is None  # unknown, not a CPU run
    row = _query(store, f"SELECT world_size, (SELECT count(*) FROM steps s WHERE s.run_id = r.run_id) FROM runs r "
                        f"WHERE run_id = '{imported['run_id']}'")  # fmt: skip
    assert row == [(None, 0)]  # no world size, no step times in the file: unknown, never 1 or 0
    state = json.loads((HF / "trainer_state.json").read_text())
    runtime = next(e["train_runtime"] for e in state["log_history"] if "train_runtime" in e)
    assert imported["time_to_train_s"] == pytest.approx(runtime, abs=1e-3)
    evals = _query(
        store, f"SELECT metric, value FROM evals WHERE run_id = '{imported['run_id']}' ORDER BY time, seq"
    )
    recorded_evals = _query(store, f"SELECT metric, value FROM evals WHERE run_id = '{recorded['run_id']}' "
                                   "AND split = 'validation' AND rank = 0 ORDER BY time, seq")  # fmt: skip
    assert [(m, pytest.approx(v)) for m, v in evals] == recorded_evals
    # when: the file has no clock but train_runtime; an evaluation at step s of the global_step sits s / global_step
    # into it (the importer's documented placement), worked out from the json here, and within half a step of
    # when the recorder saw that evaluation on rank 0 of the same training
    entries = [e for e in state["log_history"] if "eval_loss" in e]
    placed = [runtime * e["step"] / state["global_step"] for e in entries]
    offsets = _query(store, f"SELECT e.time - r.started_at FROM evals e JOIN runs r USING (run_id) WHERE run_id = "
                            f"'{imported['run_id']}' ORDER BY e.time, e.seq")  # fmt: skip
    assert [t for (t,) in offsets] == pytest.approx(placed, abs=1e-6) and len(placed) == 2
    seen = _query(store, f"SELECT e.time - r.started_at FROM evals e JOIN runs r USING (run_id) WHERE run_id = "
                         f"'{recorded['run_id']}' AND split = 'validation' AND rank = 0 ORDER BY e.time, e.seq")  # fmt: skip
    half_step = runtime / state["global_step"] / 2
    assert all(abs(t - r) < half_step for t, (r,) in zip(placed, seen, strict=True)), (
        placed,
        seen,
        half_step,
    )
    # one training, two records: the log's run is superseded by the recorded one, never a second repetition
    assert imported["superseded"].startswith(f"the same training as run {recorded['run_id']}")
    assert recorded["superseded"] is None and "counted once, as that run" in out
    assert not [f for f in _lint(store, "HS215") if imported["run_id"] in f["runs"]]


LIGHTNING = DATA / "lightning-digits"


def test_lightning_metrics_csv_against_the_recorder_of_the_same_training(tmp_path: Path) -> None:
    """Lightning's metrics.csv (rank 0's, no clock) beside the recorder's events of that training: the evaluations
    agree with the recorder's; no time to train, no world size, and the rules say they cannot tell (not 0 s, not
    killed)."""
    store = tmp_path / "s.duckdb"
    out = _ingest(store, LIGHTNING)
    assert (
        "read as Lightning CSVLogger metrics.csv" in out and "hparams.yaml: read with the metrics.csv" in out
    )
    runs = {r["source"]: r for r in _runs(store)}
    imported, recorded = runs["lightning-metrics"], runs["native"]
    assert imported["time_to_train_s"] is None and imported["n_accelerators"] is None
    assert imported["status"] == "end_unknown" and "does not say how or when" in imported["reason"]
    with (LIGHTNING / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    from_csv = [(k.removeprefix("val_").removeprefix("test_"), float(v)) for r in rows for k, v in r.items()
                if k.startswith(("val_", "test_")) and v]  # fmt: skip
    evals = _query(
        store, f"SELECT metric, value FROM evals WHERE run_id = '{imported['run_id']}' ORDER BY seq"
    )
    # val_acc is named accuracy, as the callback of the same training names it
    assert [(m.replace("acc", "accuracy"), v) for m, v in from_csv] == evals and len(evals) == 3
    recorded_evals = _query(store, f"SELECT metric, value FROM evals WHERE run_id = '{recorded['run_id']}' "
                                   "AND rank = 0 ORDER BY time, seq")  # fmt: skip
    assert [(m, pytest.approx(v)) for m, v in evals] == recorded_evals
    assert imported["superseded"].startswith(f"the same training as run {recorded['run_id']}")
    hyper = _query(
        store, f"SELECT attrs -> 'hyperparameters' FROM runs WHERE run_id = '{imported['run_id']}'"
    )
    assert json.loads(hyper[0][0]) == {"hidden": 128, "lr": 0.1}  # hparams.yaml beside it
    assert not [f for f in _lint(store, "HS206,HS215") if imported["run_id"] in f["runs"]]  # counted once
    # the log alone (no recorded twin): the rules say what it cannot tell
    alone = tmp_path / "alone.duckdb"
    _ingest(alone, LIGHTNING / "metrics.csv")
    outcomes = {
        f["code"]: f["outcome"] for f in _lint(alone, "HS206,HS215") if imported["run_id"] in f["runs"]
    }
    assert outcomes == {"HS206": "cannot_verify", "HS215": "cannot_verify"}


CODECARBON = DATA / "codecarbon"


def _energy(store: Path, run_id: str) -> dict[str, Any]:
    code, out = _cli("show", run_id, "-f", "json", "--store", str(store))
    assert code == 0, out
    energy: dict[str, Any] = json.loads(out)["energy_to_train"]
    return energy


def test_codecarbon_tracker_joined_by_time_window_where_the_run_fills_it(tmp_path: Path) -> None:
    """Three trackers of one emissions.csv: the one around a 3-minute runner training is that run's energy to train
    (by time window, said, partly estimated); the one around a 0.2 s training is mostly start-up, so not that run's
    (said why); a 0 kWh row is not measured, never 0 J."""
    store = tmp_path / "s.duckdb"
    out = _ingest(store, CODECARBON)
    assert "read as CodeCarbon emissions.csv" in out and "3 energy records" in out
    with (CODECARBON / "emissions.csv").open() as f:
        rows = {r["project_name"]: r for r in csv.DictReader(f)}
    runs = {r["run_id"].split("-")[0]: r for r in _runs(store)}
    long, short = runs["resnet18"], runs["mlp"]
    got = _energy(store, long["run_id"])
    assert got["joules"] == pytest.approx(float(rows["resnet18-runner"]["energy_consumed"]) * 3.6e6)
    assert got["source"] == "CodeCarbon (partly estimated)" and "time window alone" in got["joined"]
    assert got["mean_power_w"] == pytest.approx(got["joules"] / long["time_to_train_s"])
    assert (
        float(rows["resnet18-runner"]["duration"])
        > long["time_to_train_s"]
        > 0.9 * float(rows["resnet18-runner"]["duration"])
    )
    none = _energy(store, short["run_id"])
    assert none["source"] == "not recorded" and "fills less than 90%" in none["why"]
    # the same trackers, the long one's energy read as 0 (in memory): not measured, never 0 J
    zero = tmp_path / "zero"
    zero.mkdir()
    text = (CODECARBON / "emissions.csv").read_text()
    kwh = rows["resnet18-runner"]["energy_consumed"]
    (zero / "emissions.csv").write_text(text.replace(f",{kwh},", ",0.0,", 1))
    store2 = tmp_path / "s2.duckdb"
    _ingest(store2, zero, *(CODECARBON / "runner").iterdir())
    none = _energy(store2, long["run_id"])
    assert none["source"] == "not recorded" and "not measured (energy_consumed is 0" in none["why"]
    # a tracker per rank (in memory: the long row again, started a second earlier): both cover the run, and the
    # CSV cannot say whether they counted one machine twice, so neither is taken
    twice = tmp_path / "twice"
    twice.mkdir()
    row = next(line for line in text.splitlines() if ",resnet18-runner," in line)
    duration = rows["resnet18-runner"]["duration"]
    (twice / "emissions.csv").write_text(text + row.replace(duration, str(float(duration) + 1)) + "\n")
    store3 = tmp_path / "s3.duckdb"
    _ingest(store3, twice, *(CODECARBON / "runner").iterdir())
    none = _energy(store3, long["run_id"])
    assert none["source"] == "not recorded" and "2 CodeCarbon trackers cover the run" in none["why"]


SACCT = DATA / "sacct"


def test_slurm_accounting_joined_by_job_id_never_zero_joules(tmp_path: Path) -> None:
    """sacct's lines of a real Slurm (slurmdbd) land as energy records; the recorded training of job 5 is joined by
    its job id: its energy is "not measured" (this VM's plugin read nothing), and once the line holds a counter
    (in memory) that is the run's energy, counted once though the jobs-only and the steps file both hold it."""
    store = tmp_path / "s.duckdb"
    _ingest(store, SACCT)
    lines = [
        ln for f in ("sacct-jobs.txt", "sacct-steps.txt") for ln in (SACCT / f).read_text().splitlines()[1:]
    ]
    assert _query(store, "SELECT count(*) FROM energy_records") == [(len(lines),)]
    states = dict(
        _query(store, "SELECT DISTINCT job_id || coalesce('.' || step_id, ''), state FROM energy_records")
    )
    assert states == {ln.split("|")[0]: ln.split("|")[10] for ln in lines}  # CANCELLED by 0, FAILED, ...
    (run,) = _runs(store)
    assert run["slurm_job_id"] == "5"
    none = _energy(store, run["run_id"])
    assert none["source"] == "not recorded" and "not measured (ConsumedEnergyRaw empty" in none["why"]
    # the same files with job 5's counter read (in memory): 51,000 J, once
    measured = tmp_path / "measured"
    shutil.copytree(SACCT, measured)
    for name in ("sacct-jobs.txt", "sacct-steps.txt"):
        text = (measured / name).read_text()
        (measured / name).write_text(
            re.sub(r"^(5\|train\|(?:[^|]*\|){7})\|", r"\g<1>51000|", text, flags=re.M)
        )
    store2 = tmp_path / "s2.duckdb"
    _ingest(store2, measured)
    got = _energy(store2, run["run_id"])
    assert got["joules"] == 51000 and got["source"] == "Slurm accounting"
    assert "joined by Slurm job id (job 5's line" in got["joined"]


def test_dllogger_log_and_its_summary_with_warmup(tmp_path: Path) -> None:
    """A DLLogger log written by the real dllogger package (tests/data/imported/dllogger/make_dllogger_log.py)."""
    log = DATA / "dllogger" / "dllogger.json"
    store = tmp_path / "s.duckdb"
    assert "read as NVIDIA DLLogger log" in _ingest(store, log)
    rows = [json.loads(line.removeprefix("DLLL ")) for line in log.read_text().splitlines()]
    params = next(r["data"] for r in rows if r.get("step") == "PARAMETER")
    train = [
        r for r in rows if r.get("type") == "LOG" and isinstance(r["step"], list) and len(r["step"]) == 2
    ]
    val = [r for r in rows if r.get("type") == "LOG" and isinstance(r["step"], list) and len(r["step"]) == 1]
    (run,) = _runs(store)
    assert run["status"] == "success" and run["local_batch_size"] == params["batch_size"]
    got = _query(
        store, "SELECT count(*), sum(samples), count(*) FILTER (WHERE warmup), sum(t_compute) FROM steps"
    )[0]
    assert got[:3] == (len(train), len(train) * params["batch_size"], 1)
    assert got[3] == pytest.approx(sum(r["data"]["train.compute_time"] for r in train))
    assert run["final_accuracy"]["value"] == pytest.approx(val[-1]["data"]["val.top1"] / 100)
    # the [] summary averages every iteration, the first included: HS205 names it beside the steady rate
    (finding,) = [f for f in _lint(store, "HS205") if "summary" in f["message"]]
    assert finding["outcome"] == "fail" and "train.total_ips" in finding["message"]


def test_a_reader_that_fails_refuses_its_file_and_the_others_land(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from honestscale.collector import importers

    def boom(path: Path, text: str, campaign: str | None) -> Any:
        raise ValueError("a log no reader foresaw")

    real = importers.FORMATS["megatron-log"]
    monkeypatch.setitem(
        importers.FORMATS, "megatron-log", importers.Reader(real.format, real.label, real.sniff, boom)
    )
    store = tmp_path / "s.duckdb"
    code, out = _cli("ingest", str(MEGATRON), str(CONSOLE_R022), "--store", str(store))
    assert code == 3 and "the reader failed on it (ValueError: a log no reader foresaw)" in out
    assert [r["source"] for r in _runs(store)] == ["torchtitan-console"]


def test_torchtitan_console_of_two_ranks_and_of_the_aggregator(tmp_path: Path) -> None:
    """The real rank-0 console with every [titan] line also printed as rank 1's (as torchrun prints a console
    without --local-ranks-filter): rank 0's lines are read once. The observability branch's console prints through
    its aggregator process: no step times (its timestamps are the printer's), so its claims stay unchecked."""
    text = _text(CONSOLE_R022)
    both = (
        "\n".join(f"{line}\n{line.replace('[rank0]:', '[rank1]:', 1)}" for line in text.splitlines()) + "\n"
    )
    log = tmp_path / "two-ranks.log"
    log.write_text(both)
    store = tmp_path / "s.duckdb"
    out = _ingest(store, log, CONSOLE_OBS)
    assert "ranks [0, 1] print into this console: rank 0's lines are read" in out
    assert "does not follow" not in out
    steps = sorted(n for (n,) in _query(store, "SELECT count(s.run_id) FROM runs r LEFT JOIN steps s USING (run_id) "
                                              "GROUP BY r.run_id"))  # fmt: skip
    # the two-rank console: one step per step line of rank 0; the aggregator's: none
    assert steps == [0, len(re.findall(r"step:\s+\d+\s+loss", _text(CONSOLE_R022, plain=True)))]
    claimed = [f for f in _lint(store, "HS107") if "claimed" in f["message"] and f["outcome"] == "fail"]
    assert not claimed, claimed


def test_megatron_resumed_and_model_parallel_and_crashed(tmp_path: Path) -> None:
    """Three changes of the real Megatron log, each in memory: resumed (its lines before iteration 55 cut), tensor
    parallel 2 (the arguments block says so), and a crash before the first iteration (the log cut there)."""
    text = _text(MEGATRON)
    first = text.index(" iteration        1/")
    head = text[: text.rindex("\n", 0, first) + 1]  # everything before the first iteration line
    resumed = head + text[text.index("\n", text.index(" iteration       50/")) + 1 :]
    tp2 = re.sub(r"^(  tensor_model_parallel_size \.+ )1$", r"\g<1>2", text, flags=re.MULTILINE)
    tp2 = re.sub(r"^(  world_size \.+ )1$", r"\g<1>2", tp2, flags=re.MULTILINE)
    crashed = text[: text.index("[before the start of training step]")]
    for name, body in (("resumed", resumed), ("tp2", tp2), ("crashed", crashed)):
        (tmp_path / f"{name}.log").write_text(body)
    store = tmp_path / "s.duckdb"
    _ingest(store, *(tmp_path / f"{n}.log" for n in ("resumed", "tp2", "crashed")))
    rows = {r[0]: r[1:] for r in _query(
        store, "SELECT r.world_size || '/' || coalesce(r.parallel->>'tp', '1') || '/' || r.status, "
               "min(s.iterations) FILTER (WHERE s.warmup), count(s.samples), count(s.run_id) "
               "FROM runs r LEFT JOIN steps s USING (run_id) GROUP BY ALL")}  # fmt: skip
    # resumed: its first line (iteration 55) covers 5 iterations (log_interval), not 55
    assert rows["1/1/success"] == (5, 10, 10)
    # tensor parallel 2: one rank's line cannot split the samples among the ranks: left out, never a wrong rate
    assert rows["2/2/success"][1:] == (0, 21)
    # cut before its first iteration: a run without a stop (incomplete: still starting, or killed), never absent
    assert rows["1/1/incomplete"] == (None, 0, 0)


def test_a_trainer_checkpoint_state_is_left_to_the_later_state(tmp_path: Path) -> None:
    """An output folder with checkpoint-16/ (the real state cut at step 16, as the Trainer saves it mid-run) and
    checkpoint-32/ (the real final state): one run, the later state's; the earlier is named, not a second run."""
    state = json.loads((HF / "trainer_state.json").read_text())
    early = state | {
        "global_step": 16,
        "log_history": [e for e in state["log_history"] if e["step"] <= 16 and "train_runtime" not in e],
    }
    for step, body in ((16, early), (32, state)):
        (tmp_path / "out" / f"checkpoint-{step}").mkdir(parents=True)
        (tmp_path / "out" / f"checkpoint-{step}" / "trainer_state.json").write_text(
            json.dumps(body, indent=2)
        )
    store = tmp_path / "s.duckdb"
    code, out = _cli("ingest", str(tmp_path / "out"), "--store", str(store))
    assert code == 0 and "1 earlier Trainer checkpoint states left to the later state" in out
    (run,) = _runs(store)
    assert run["status"] == "success"


def test_steady_state_found_in_the_step_times(tmp_path: Path) -> None:
    """MSER-5 on the real structured log's 80 steps: the warm-up it finds covers at least the step the run marks,
    and the steady mean step lies in its batch-means interval; the same step times sorted (a run that never
    settles) have no steady state."""
    from honestscale.analysis import steady

    store = tmp_path / "s.duckdb"
    _ingest(store, SL)
    (run,) = _runs(store)
    code, out = _cli("show", run["run_id"], "-f", "json", "--store", str(store))
    assert code == 0, out
    ss = json.loads(out)["steady_state"]
    assert (
        ss["detected_warmup_steps"] is not None
        and ss["detected_warmup_steps"] >= ss["marked_warmup_steps"] == 1
    )
    assert ss["low_s"] < ss["steady_step_s"] < ss["high_s"] and ss["method"].startswith("MSER-5")
    times = [t for (t,) in _query(store, "SELECT t_total FROM steps ORDER BY time, seq")]
    assert steady.of_steps(times, 1).warmup_steps == ss["detected_warmup_steps"]
    drifting = steady.of_steps(sorted(times[5:]), 0)
    assert drifting.warmup_steps is None and drifting.verdict.startswith("no steady state")
    code, text = _cli("show", run["run_id"], "--store", str(store))
    assert (
        "warm-up ends after step" in text and "not counted" in text
    )  # tokens only: samples never shown as 0


def test_profiler_traces_land_as_evidence_beside_their_run(tmp_path: Path) -> None:
    """The torchtitan run's own Kineto trace (GPU, in its dump folder) lands beside the run of that folder's
    experiment log; a 2-rank gloo run's CPU traces (tests/data/imported/kineto-cpu) land unlinked, named."""
    store = tmp_path / "s.duckdb"
    out = _ingest(store, OBS, DATA / "kineto-cpu")
    assert "read as PyTorch profiler (Kineto) trace" in out and "stored as evidence, linked to no run" in out
    (run,) = _runs(store)  # a trace is never a run of its own
    code, shown = _cli("show", run["run_id"], "-f", "json", "--store", str(store))
    assert code == 0, shown
    (step,) = json.loads(shown)["profiled_steps"]
    trace = json.loads(_text(OBS / "profile_traces" / "iteration_80" / "rank0_trace.json.gz"))
    # the step's window: its CPU annotation and its device annotations (every stream), first to last
    marks = [e for e in trace["traceEvents"] if e.get("cat") in ("user_annotation", "gpu_user_annotation")
             and e["name"] == f"ProfilerStep#{step['step']}"]  # fmt: skip
    lo, hi = min(e["ts"] for e in marks), max(e["ts"] + e["dur"] for e in marks)
    window = {"ts": lo, "dur": hi - lo}
    kernels = [e for e in trace["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
               and window["ts"] <= e["ts"] and e["ts"] + e["dur"] <= window["ts"] + window["dur"]]  # fmt: skip
    assert step["t_step"] == pytest.approx(window["dur"] / 1e6)
    assert (
        max(k["dur"] for k in kernels) / 1e6 <= step["t_busy"] <= sum(k["dur"] for k in kernels) / 1e6 + 1e-9
    )
    assert step["t_busy"] + step["t_idle"] == pytest.approx(step["t_step"])
    cpu = _query(store, "SELECT rank, step, t_comm, comm_by_kind, t_busy FROM profile_steps WHERE run_id IS NULL "
                        "ORDER BY rank, step")  # fmt: skip
    assert [(r, s) for r, s, *_ in cpu] == [(r, s) for r in (0, 1) for s in (2, 3, 4)]
    for rank, s, t_comm, kinds, busy in cpu:
        events = json.loads(_text(DATA / "kineto-cpu" / f"rank{rank}_trace.json.gz"))["traceEvents"]
        w = next(e for e in events if e.get("name") == f"ProfilerStep#{s}")
        inside = sum(min(e["ts"] + e["dur"], w["ts"] + w["dur"]) - max(e["ts"], w["ts"]) for e in events
                     if e.get("name") == "gloo:all_reduce" and e["ts"] < w["ts"] + w["dur"] and e["ts"] + e["dur"] > w["ts"])  # fmt: skip
        assert t_comm == pytest.approx(inside / 1e6) and json.loads(kinds) == {
            "all_reduce": pytest.approx(inside / 1e6)
        }
        assert busy is None  # a CPU trace has no device to be busy: unknown, never 0


def test_a_profiler_step_never_closed_is_left_out_and_named(tmp_path: Path) -> None:
    """The profiler writes ``dur: -1`` for a span it never closed (a run killed inside its window): that step of a
    real CPU trace is left out and named, the others land as they were."""
    trace = json.loads(_text(DATA / "kineto-cpu" / "rank0_trace.json.gz"))
    step = next(e for e in trace["traceEvents"] if e.get("name") == "ProfilerStep#3")
    step["dur"] = -1
    cut = tmp_path / "rank0_trace.json"
    cut.write_text(json.dumps(trace))
    store = tmp_path / "s.duckdb"
    out = _ingest(store, cut)
    assert "ProfilerStep#3 (ts" in out and "dur -1" in out, out
    assert [s for (s,) in _query(store, "SELECT step FROM profile_steps ORDER BY step")] == [2, 4]
