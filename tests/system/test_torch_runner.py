"""The PyTorch DDP runner for real: 2 ranks over gloo on the CPU, launched by `honestscale run`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import REPO, cli, hs, query
from tests.tools import module

module("torch", top=True)


def _run(out: Path, *args: str, workers: int = 2) -> subprocess.CompletedProcess[str]:
    return hs("run", "--framework", "torch", "--workers", str(workers), *args, "--out", out, timeout=300)


def _ingest(store: Path, out: Path) -> list[dict[str, Any]]:
    result = hs("ingest", out, "--store", store)
    assert result.returncode == 0, result.stderr
    return list(json.loads(cli("runs", "--store", store, "-f", "json").stdout))


def test_two_ranks_digits_lands_as_one_honest_run(tmp_path: Path, store: Path) -> None:
    out = tmp_path / "runs"
    result = _run(out, "--model", "mlp", "--dataset", "digits", "--epochs", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = _ingest(store, out)
    assert run["status"] == "success" and run["world_size"] == 2 and run["framework"] == "torch"
    assert run["n_accelerators"] == 0  # on CPU (gloo): workers are processes, no accelerator
    assert run["final_accuracy"]["split"] == "test" and run["final_accuracy"]["value"] > 0.8
    shown = json.loads(cli("show", run["run_id"], "--store", store, "-f", "json").stdout)
    assert shown["launcher"] == "local" and shown["backend"] == "gloo" and shown["world_size"] == 2
    assert (shown["train_size"], shown["validation_size"], shown["test_size"]) == (1257, 270, 270)
    assert shown["data_source"] == "in_memory" and shown["local_batch_size"] == 32
    # threads per worker (contract 2): the launcher split this process's CPUs between the 2 ranks, each rank says so
    cpus = sorted(os.sched_getaffinity(0))
    split = os.environ.get("OMP_NUM_THREADS") or str(max(1, len(cpus) // 2))
    assert shown["intra_op_threads"] == int(split) and shown["inter_op_threads"] >= 1
    assert shown["cpus_allowed"] == len(cpus)
    assert json.loads(query(store, "SELECT cpu_affinity FROM runs")[0][0]) == cpus
    knobs = json.loads(shown["launch_env"])
    assert knobs["OMP_NUM_THREADS"] == split
    assert knobs["HONESTSCALE_LAUNCHER_SET"] == ("" if "OMP_NUM_THREADS" in os.environ else "OMP_NUM_THREADS")
    for rank in (0, 1):
        (start,) = [e for e in map(json.loads, (out / run["run_id"] / f"events-rank{rank}.jsonl").open())
                    if e["kind"] == "run_start"]  # fmt: skip
        assert (
            start["schema"] >= 2 and start["intra_op_threads"] == int(split) and start["cpu_affinity"] == cpus
        )
    assert {e["split"] for e in shown["evals"]} == {"train", "validation", "test"}
    assert [e["epoch"] for e in shown["evals"] if e["split"] == "test"] == [2]  # test once, at the end
    assert [s["rank"] for s in shown["step_breakdown"]] == [0, 1] and all(
        s["comm_measured"] for s in shown["step_breakdown"]
    )
    parts = query(store, "SELECT t_data + t_compute + t_comm + t_optimizer, t_total, t_comm FROM steps")
    assert len(parts) == 2 * 3 * (1257 // 64)
    assert all(abs(p - t) <= 0.05 * t for p, t, _ in parts)
    assert sum(c for _, _, c in parts) > 0  # two ranks: communication measured, not zero


def test_sigterm_mid_epoch_records_timeout_and_every_earlier_event(tmp_path: Path, store: Path) -> None:
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "honestscale", "run", "--framework", "torch", "--workers", "2", "--model", "mlp",
           "--dataset", "digits", "--epochs", "100000", "--out", str(out), "--run-id", "long"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    rank0 = out / "long" / "events-rank0.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not rank0.exists() or rank0.read_text().count('"step"') < 50):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 143
    runs = _ingest(store, out)
    assert runs[0]["status"] == "timeout" and "SIGTERM" in runs[0]["reason"]
    for rank in (0, 1):
        seqs = [r[0] for r in query(store, "SELECT seq FROM events WHERE rank = ? ORDER BY seq", [rank])]
        assert seqs == list(range(len(seqs))) and len(seqs) > 10  # nothing lost before the kill
    assert query(store, "SELECT count(DISTINCT rank) FROM markers WHERE kind = 'run_stop'") == [(2,)]


def test_model_that_raises_records_failed_with_the_exception(tmp_path: Path, store: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(0)
    for split, n, width in (
        ("train", 256, 20),
        ("validation", 64, 7),
        ("test", 64, 20),
    ):  # validation is wrong
        np.save(data / f"{split}_x.npy", rng.standard_normal((n, width)).astype(np.float32))
        np.save(data / f"{split}_y.npy", rng.integers(0, 4, n))
    out = tmp_path / "runs"
    result = _run(out, "--model", "mlp", "--dataset", "memmap", "--data-path", str(data), "--epochs", "2")
    assert result.returncode == 1
    (run,) = _ingest(store, out)
    assert run["status"] == "failed"
    assert "RuntimeError" in run["reason"] and "shapes cannot be multiplied" in run["reason"]
    shown = json.loads(cli("show", run["run_id"], "--store", store, "-f", "json").stdout)
    assert shown["data_source"] == "filesystem" and shown["data_path"] == str(data)
    assert sum(s["steps"] for s in shown["step_breakdown"]) > 0  # the steps before the failure are kept


@pytest.mark.parametrize("compression", ["fp16", "powersgd"])
def test_gradient_compression_hooks(tmp_path: Path, store: Path, compression: str) -> None:
    out = tmp_path / "runs"
    result = _run(
        out, "--model", "cnn", "--dataset", "digits", "--epochs", "2", "--grad-compression", compression
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = _ingest(store, out)
    assert run["status"] == "success"
    assert query(store, "SELECT grad_compression, model FROM runs") == [(compression, "cnn")]
    assert query(store, "SELECT bool_and(comm_measured) FROM steps") == [(True,)]


def test_synthetic_data_target_not_reached_and_bad_batch(tmp_path: Path, store: Path) -> None:
    out = tmp_path / "runs"
    result = _run(out, "--model", "cnn", "--dataset", "synthetic", "--synthetic-shape", "1,8,8",
                  "--synthetic-size", "512", "--epochs", "1", "--target-accuracy", "0.99", workers=1)  # fmt: skip
    assert result.returncode == 3  # aborted: the target was never reached
    (run,) = _ingest(store, out)
    assert run["status"] == "aborted" and "never reached 0.99" in run["reason"]
    assert query(store, "SELECT data_source, stop_criterion, stop_value FROM runs") == [
        ("synthetic", "target_accuracy", 0.99)
    ]
    bad = _run(out, "--model", "mlp", "--batch-size", "63", "--epochs", "1")
    assert bad.returncode != 0 and "not divisible by the 2 ranks" in bad.stdout + bad.stderr


def test_image_folder_resnet_bf16_and_sample_budget(tmp_path: Path, store: Path) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    root = tmp_path / "imgs"
    for split, n in (("train", 24), ("val", 8)):  # no test/: the validation images are halved
        for label, shade in (("cat", 40), ("dog", 200)):
            folder = root / split / label
            folder.mkdir(parents=True)
            for i in range(n):
                pixels = np.clip(rng.normal(shade, 30, (12, 12, 3)), 0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(folder / f"{i}.png")
    out = tmp_path / "runs"
    result = _run(out, "--model", "resnet18", "--dataset", "folder", "--data-path", str(root), "--image-size", "16",
                  "--batch-size", "8", "--max-samples", "32", "--precision", "amp-bf16", workers=1)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = _ingest(store, out)
    assert run["status"] == "success"
    row = query(store, "SELECT data_source, train_size, validation_size, test_size, stop_criterion, precision, "
                       "input_shape FROM runs")  # fmt: skip
    assert row == [("filesystem", 48, 8, 8, "samples", "amp-bf16", "[3,16,16]")]
    assert query(store, "SELECT sum(samples) FROM steps") == [(32,)]


def test_time_budget_is_agreed_by_every_rank(tmp_path: Path, store: Path) -> None:
    out = tmp_path / "runs"
    result = _run(out, "--model", "mlp", "--epochs", "100000", "--max-time", "1.5")
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = _ingest(store, out)
    assert run["status"] == "success" and 1.5 <= run["time_to_train_s"] < 30
    assert query(store, "SELECT stop_criterion, stop_value FROM runs") == [("wall_time", 1.5)]
    per_rank = query(store, "SELECT rank, count(*) FROM steps GROUP BY rank ORDER BY rank")
    assert per_rank[0][1] == per_rank[1][1]  # both ranks stopped at the same step
