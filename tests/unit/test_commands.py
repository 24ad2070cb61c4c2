"""Every command of the CLI, in process (typer's CliRunner), on events replayed from examples/digits-ddp (written
by the real torch runner): the inner loop's check that each command parses, reaches its function and prints what
the store holds. What a command does for real (training, Slurm, the browser) is the system tier's
(tests/system); the MLPerf trees and rendered reports, the integration tier's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from honestscale.cli import app
from honestscale.errors import HonestscaleError
from tests.conftest import EXAMPLE, REPO

CAMPAIGN = "digits-ddp-example"  # the campaign the runner recorded


def run(*args: str | Path, ok: tuple[int, ...] = (0,)) -> Result:
    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200", "HONESTSCALE_STORE": ""})
    assert result.exit_code in ok, (args, result.output, result.exception)
    return result


def refused(*args: str | Path) -> HonestscaleError:
    """A command the user got wrong: the error (main() prints it, with its fix, and exits with its code)."""
    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    assert isinstance(result.exception, HonestscaleError), (args, result.output, result.exception)
    return result.exception


def as_json(*args: str | Path, ok: tuple[int, ...] = (0,)) -> Any:
    return json.loads(run(*args, ok=ok).stdout)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("commands") / "s.duckdb"
    run("migrate", "--store", path)
    landed = run("ingest", EXAMPLE, "--store", path)
    assert "4 run" in landed.output, landed.output
    return path


def test_ingest_is_idempotent_and_runs_list_what_landed(store: Path) -> None:
    again = run("ingest", EXAMPLE, "--store", store)
    assert "6 files (6 unchanged): 0 events landed, 0 runs touched" in again.output, again.output
    runs = as_json("runs", "--store", store, "--format", "json")
    assert len(runs) == 4 and {r["status"] for r in runs} == {"success"}
    assert sorted(r["world_size"] for r in runs) == [1, 1, 2, 2]
    assert as_json("quarantine", "--store", store, "--format", "json") == []


def test_ingest_without_a_terminal_prints_plain_progress_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch job's log has no progress bar: every PLAIN_EVERY seconds a plain line says how far ingest is."""
    from honestscale.cli import _ingest_output

    monkeypatch.setattr(_ingest_output, "PLAIN_EVERY", 0.0)
    landed = run("ingest", EXAMPLE, "--store", tmp_path / "s.duckdb")
    lines = [line for line in landed.stderr.splitlines() if line.startswith("ingest: ")]
    assert len(lines) == 6 and lines[-1].startswith("ingest: 6 of 6 file(s) read"), landed.stderr
    quiet = run("ingest", EXAMPLE, "--store", tmp_path / "q.duckdb", "--quiet")
    assert "ingest: " not in quiet.stderr


def test_show_summary_advise_lint_and_report_read_the_same_runs(store: Path) -> None:
    one = as_json("runs", "--store", store, "--format", "json")[0]["run_id"]
    shown = run("show", one, "--store", store)
    assert one in shown.stdout and "step" in shown.stdout.lower()
    summary = as_json("summary", "--store", store, "--campaign", CAMPAIGN, "-f", "json")
    assert sorted(s["workers"] for s in summary) == [1, 2]
    findings = as_json("lint", "--store", store, "--campaign", CAMPAIGN, "-f", "json", ok=(0, 1))
    assert all(f["code"].startswith("HS") and f["outcome"] in ("fail", "cannot_verify") for f in findings)
    model = as_json("report", "--store", store, "--campaign", CAMPAIGN, "--format", "json")
    (series,) = [c for c in model["comparisons"] if c["kind"] == "scaling"]
    thru = {p["workers"]: p["throughput"] for p in series["points"]}
    assert {s["workers"]: s["samples_per_s"] for s in summary} == pytest.approx(thru, rel=1e-6)
    advice = as_json("advise", "--store", store, "--campaign", CAMPAIGN, "-f", "json")
    # the advisor leaves out exactly the runs lint fails on the rules that make advice meaningless (in_memory
    # data: HS106), and says so, rather than advising from them
    barred = {r for f in findings if f["code"] in ("HS101", "HS106", "HS110") and f["outcome"] == "fail"
              for r in f["runs"]}  # fmt: skip
    assert barred and set(advice["excluded"]) == barred
    if (
        len(barred) == len(summary) * 2
    ):  # every run barred: nothing to advise from, and no group pretends otherwise
        assert advice["groups"] == []


def test_compare_pairs_the_two_worker_counts(store: Path) -> None:
    result = run("compare", "workers=1", "workers=2", "--store", store, "-f", "json", ok=(0, 1, 3))
    got = json.loads(result.stdout)
    assert got and "pairs" in got, got


def test_contract_migrate_and_store_copy(store: Path, tmp_path: Path) -> None:
    assert "cpu_pressure" in run("contract", "--markdown").stdout
    assert json.loads(run("contract", "--json-schema").stdout)["title"].startswith("honestscale event")
    copy = tmp_path / "copy.duckdb"
    copied = run("store", "copy", store, copy)
    assert "row for row" in copied.output or "checked" in copied.output, copied.output
    assert len(as_json("runs", "--store", copy, "--format", "json")) == 4
    fresh = tmp_path / "new.duckdb"
    run("migrate", "--store", fresh)
    assert fresh.exists() and as_json("runs", "--store", fresh, "--format", "json") == []


def test_campaign_run_and_submit_plan_without_training(tmp_path: Path) -> None:
    spec = tmp_path / "digits-campaign.toml"
    shutil.copy(REPO / "examples" / "digits-campaign.toml", spec)
    planned = run("campaign", "run", spec, "--dry-run", "--store", tmp_path / "never.duckdb")
    assert "digits-scaling-workers=2" in planned.stdout and not (tmp_path / "never.duckdb").exists()
    slurm = tmp_path / "slurm.toml"
    slurm.write_text(
        spec.read_text() + '\n[slurm]\npartition = "local"\ntime = "00:10:00"\ncpus_per_task = 1\n'
    )
    scripts = run("campaign", "submit", slurm, "--dry-run", "--store", tmp_path / "never.duckdb")
    assert "#SBATCH" in scripts.stdout and "srun" in scripts.stdout
    assert not (tmp_path / "never.duckdb").exists()


def test_slurm_commands_on_a_campaign_never_submitted(tmp_path: Path, store: Path) -> None:
    spec = tmp_path / "slurm.toml"
    spec.write_text((REPO / "examples" / "digits-campaign.toml").read_text()
                    + '\n[slurm]\npartition = "local"\ntime = "00:10:00"\ncpus_per_task = 1\n')  # fmt: skip
    copy = tmp_path / "s.duckdb"
    shutil.copy(store, copy)
    assert "has been submitted" in run("campaign", "status", spec, "--store", copy).output
    assert "nothing to resubmit" in run("campaign", "resubmit", spec, "--store", copy).output
    assert "nothing to collect" in run("campaign", "collect", spec, "--store", copy).output


def test_run_probe_and_serve_refuse_bad_input_before_starting_anything(tmp_path: Path) -> None:
    exc = refused("run", "--workers", "0", "--out", tmp_path)
    assert "at least one worker" in exc.message and exc.fix
    exc = refused("probe", "--model", f"{tmp_path / 'nope.py'}:build", "--out", tmp_path / "p")
    assert "nope.py" in exc.message and exc.fix
    assert not (tmp_path / "p" / "runs").exists()
    exc = refused("serve", "--store", tmp_path / "missing.duckdb")
    assert "missing.duckdb" in exc.message and exc.fix


def test_ctrl_c_that_no_command_answers_is_answered_by_main(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A press outside the part of a command that answers Ctrl-C itself (here, while ingest looks for files): typer
    alone would exit 130 saying nothing; main says what was kept, and later presses are ignored until the exit."""
    import signal

    import honestscale.cli as cli
    import honestscale.cli.ingest as store_cli

    def pressed(paths: list[str], follow_links: list[str]) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(store_cli, "discover", pressed)
    monkeypatch.setattr(
        "sys.argv", ["honestscale", "ingest", str(tmp_path), "--store", str(tmp_path / "s.duckdb")]
    )
    before = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as done:
            cli.main()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
    assert done.value.code == 130
    assert "interrupted: what had finished is kept" in capsys.readouterr().err
    # an exit 130 a command chose after saying so itself is left alone
    monkeypatch.setattr(
        store_cli, "discover", lambda paths, follow_links: (_ for _ in ()).throw(SystemExit(130))
    )
    with pytest.raises(SystemExit) as chosen:
        cli.main()
    assert chosen.value.code == 130 and "interrupted" not in capsys.readouterr().err


def test_every_writer_imports_what_duckdb_imports_for_arrow_before_its_store_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ingest, its --watch and campaign run open their store through _store(read_only=False): the imports DuckDB would
    make inside its first Arrow table or bound parameter (where a Ctrl-C turns into an error of the store and leaves
    pandas half made) happen before, in Python, where a Ctrl-C is an ordinary KeyboardInterrupt."""
    import honestscale.cli._app as app_module

    calls: list[str] = []

    class Opened:
        def close(self) -> None:
            calls.append("close")

    def opened(*args: Any, **kwargs: Any) -> Opened:
        calls.append(f"open read_only={kwargs['read_only']}")
        return Opened()

    monkeypatch.setattr(app_module, "ready_for_arrow", lambda: calls.append("ready"))
    monkeypatch.setattr(app_module, "open_store", opened)
    with app_module._store(tmp_path / "s.duckdb", read_only=False):
        pass
    with app_module._store(tmp_path / "s.duckdb", read_only=True):
        pass
    assert calls == ["ready", "open read_only=False", "close", "open read_only=True", "close"]


def test_the_cli_reference_is_generated_from_the_cli() -> None:
    """docs/cli.md is every command's --help as Typer writes it (as docs/rules.md is the rules'): regenerated, it
    equals the committed page, so the reference cannot drift from the commands."""
    import typer
    from typer.cli import get_docs_for_click
    from typer.core import MARKUP_MODE_KEY

    from honestscale.cli import app

    command = typer.main.get_command(app)
    ctx = typer.Context(command)
    ctx.ensure_object(dict)
    ctx.obj[MARKUP_MODE_KEY] = app.rich_markup_mode
    made = get_docs_for_click(obj=command, ctx=ctx, name="honestscale", title="honestscale: the command line")
    assert (REPO / "docs" / "cli.md").read_text() == made.strip() + "\n", (
        "regenerate: typer honestscale.cli utils docs --name honestscale --title 'honestscale: the command line' "
        "--output docs/cli.md"
    )
