"""DLLogger written by every rank (tests/data/imported/dllogger-ranks: the real dllogger 1.1.0 under torchrun, 2
ranks, each its own JSON stream with ``local_rank`` in its PARAMETER row): one training of two ranks, each rank's
steps and samples and the validations as each rank recorded them (``logged-rank<N>.json``, the generator's own
record), never two runs both called rank 0 and counted as two repetitions."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.importing import DATA, ingest, query, runs

FOLDER = DATA / "dllogger-ranks"


def _logged(rank: int) -> dict[str, object]:
    got: dict[str, object] = json.loads((FOLDER / f"logged-rank{rank}.json").read_text())
    return got


def test_every_ranks_log_is_one_rank_of_one_training(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    ingest(store, FOLDER)
    (run,) = runs(store)
    assert run["world_size"] == 2 and run["status"] == "success"
    by_rank = dict(query(store, "SELECT rank, count(*) FROM steps GROUP BY rank"))
    samples = dict(query(store, "SELECT rank, sum(samples) FROM steps GROUP BY rank"))
    for rank in (0, 1):
        mine = _logged(rank)
        assert by_rank[rank] == mine["steps"] and samples[rank] == mine["samples"], (rank, by_rank, samples)
    # the final quality is the last validation, as the ranks logged it (a percentage, kept as its fraction)
    last = _logged(0)["validations"][-1]  # type: ignore[index]
    assert run["final_quality"]["top1_accuracy"] == last["val.top1"] / 100
    imported = json.loads(query(store, "SELECT attrs FROM runs")[0][0])["imported"]
    assert "local_rank 0 of its PARAMETER row" in imported["ranks_in_log"]


def test_two_trainings_of_one_recipe_in_one_folder_are_two_runs(tmp_path: Path) -> None:
    """The same two logs beside a copy of them started an hour later (every timestamp + 3,600 s, under other
    names): one recipe and seed, two trainings, each of two ranks."""
    folder = tmp_path / "logs"
    folder.mkdir()
    for rank in (0, 1):
        text = (FOLDER / f"dllogger-{rank}.json").read_text()
        shutil.copyfile(FOLDER / f"dllogger-{rank}.json", folder / f"first-{rank}.json")
        later = re.sub(r'"timestamp": "([\d.]+)"', lambda m: f'"timestamp": "{float(m[1]) + 3600:.6f}"', text)
        (folder / f"second-{rank}.json").write_text(later)
    store = tmp_path / "s.duckdb"
    ingest(store, folder)
    landed = runs(store)
    assert len(landed) == 2 and all(r["world_size"] == 2 for r in landed), landed
    assert sorted(query(store, "SELECT count(DISTINCT rank) FROM steps GROUP BY run_id")) == [(2,), (2,)]
