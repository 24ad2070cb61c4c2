"""`honestscale claims check`: a paper's claims judged against committed event sets (never a fresh training, whose
numbers move with the machine's load), each verdict with its evidence, the exit code the worst one's (issue 57).

Expected values come from the events themselves (a few lines of json here) and, for MLPerf, from mlperf-logging's
result summarizer: never from honestscale's own helpers."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import COMPARE_RUNS, EXAMPLE, REPO, cli
from tests.lint_campaigns import BUSY, SPEC, build
from tests.tools import require

CLAIMS = REPO / "examples" / "claims"


def _check(file: Path, store: Path) -> tuple[int, dict[str, dict[str, Any]]]:
    got = cli("claims", "check", file, "--store", store, "-f", "json")
    assert got.returncode in (0, 1, 3), got.stderr
    body = json.loads(got.stdout)
    assert body["schema"] == "honestscale.claims/1" and body["exit_code"] == got.returncode
    return got.returncode, {c["id"]: c for c in body["claims"]}


def _write(tmp: Path, *claims: str) -> Path:
    path = tmp / "claims.toml"
    path.write_text("version = 1\n" + "\n".join(f"[[claim]]\n{c}" for c in claims))
    return path


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("claims") / "s.duckdb"
    assert cli("ingest", COMPARE_RUNS, EXAMPLE, "--store", store).returncode == 0
    return store


def _tta_by_campaign() -> dict[str, list[float]]:
    """Each compare example run's time to accuracy from its events: run_start to the first validation at target."""
    out: dict[str, list[float]] = {}
    for folder in sorted(COMPARE_RUNS.iterdir()):
        events = [json.loads(line) for line in (folder / "events-rank0.jsonl").open()]
        start = next(e for e in events if e["kind"] == "run_start")
        target = start["stop_value"]
        reached = next(e["time"] for e in events if e["kind"] == "eval" and e.get("split") == "validation"
                       and e.get("metric") == "accuracy" and e["value"] >= target)  # fmt: skip
        out.setdefault(start["campaign"], []).append(reached - start["time"])
    return out


def test_the_examples_give_each_verdict_and_exit_with_the_worst(examples: Path) -> None:
    code, got = _check(CLAIMS / "compare.toml", examples)
    assert code == 1  # a contradicted claim outranks one that cannot be verified
    assert {c["verdict"] for c in got.values()} == {"supported", "contradicted", "cannot verify"}
    tta = _tta_by_campaign()
    ratio = statistics.median(tta["compare-loaders"]) / statistics.median(tta["compare-base"])
    faster = got["one-loader-faster"]
    assert faster["verdict"] == "supported"
    assert faster["number"]["value"] == pytest.approx(ratio, rel=1e-9)  # 2.42x: the medians' ratio
    assert "significant difference" in " ".join(faster["evidence"]) and "p = 0.00216" in " ".join(
        faster["evidence"]
    )
    ten = got["ten-times-faster"]
    low, high = ten["number"]["low"], ten["number"]["high"]
    assert ten["verdict"] == "contradicted" and high < 9  # 10 ± 10 % and the ratio's interval do not overlap
    assert f"{ratio:.3g}x faster" in ten["reason"] and "do not overlap" in ten["reason"], ten["reason"]
    assert low < ratio < high
    assert got["rerun-faster"]["verdict"] == "contradicted"
    assert "no significant difference" in got["rerun-faster"]["reason"]
    ddp = got["ddp-two-workers"]  # 2 runs a point: no interval
    assert ddp["verdict"] == "cannot verify" and "4 more successful run(s)" in ddp["reason"], ddp["reason"]


def test_exit_codes_zero_when_all_hold_three_when_any_cannot_be_verified(
    examples: Path, tmp_path: Path
) -> None:
    held = 'id = "a"\nsays = "A is faster"\nmeasure = "time_to_accuracy"\nruns = "compare-base"\nthan = "compare-loaders"\nrelation = "faster"\n'
    unverifiable = ('id = "b"\nsays = "2 workers under 2 s"\nmeasure = "time_to_train"\n'
                    'runs = "campaign=digits-ddp-example"\nat = { workers = 2 }\nrelation = "at_most"\nvalue = 2.0\n')  # fmt: skip
    assert _check(_write(tmp_path, held), examples)[0] == 0
    assert _check(_write(tmp_path, held, unverifiable), examples)[0] == 3
    gone = 'id = "c"\nsays = "x"\nmeasure = "throughput"\nruns = "campaign=no-such"\nat = { workers = 1 }\nrelation = "at_least"\nvalue = 1\n'
    code, got = _check(_write(tmp_path, held, gone), examples)
    assert (
        code == 3
        and "no campaign 'no-such'" in got["c"]["reason"]
        and "claims.toml line" in got["c"]["reason"]
    )


def test_a_superlinear_point_with_stalls_is_not_quotable(tmp_path: Path) -> None:
    store = build(tmp_path, {"runs": BUSY, "campaign": "digits-scaling", "spec": SPEC})
    claim = ('id = "superlinear"\nsays = "2 workers train 4x faster than 1"\nmeasure = "speedup"\n'
             'runs = "campaign=digits-scaling"\nat = { workers = 2 }\nrelation = "at_least"\nvalue = 3\n')  # fmt: skip
    code, got = _check(_write(tmp_path, claim), store)
    assert code == 1 and got["superlinear"]["verdict"] == "not quotable"
    assert "HS209" in got["superlinear"]["reason"] and "do not quote" in got["superlinear"]["reason"]


def test_mlperf_claims_against_the_official_score(tmp_path: Path) -> None:
    from tests.mlperf import DATA, official_score

    folder = DATA / "mlperf-training-v1x" / "v3.1" / "Dell" / "results" / "2xXE8640x4H100-SXM-80GB" / "resnet"
    require(folder.is_dir(), str(folder), "../shared/data beside the repository")
    minutes, factor, _ = official_score(folder)  # mlperf-logging's summarizer: olympic mean x scaling.json
    assert minutes is not None and factor is not None and factor != 1.0
    store = tmp_path / "s.duckdb"
    assert cli("ingest", folder, "--store", store).returncode == 0
    runs = 'runs = "source=mlperf,system=2xXE8640x4H100-SXM-80GB"\nmeasure = "mlperf_score"\nrelation = "about"\n'
    code, got = _check(_write(tmp_path, f'id = "as-scored"\nsays = "in {minutes:.2f} min"\n{runs}value = {minutes:.2f}\nunit = "min"\ntolerance = "0.5%"\n',
                              f'id = "tenth-faster"\nsays = "in {0.9 * minutes:.2f} min"\n{runs}value = {0.9 * minutes:.2f}\nunit = "min"\ntolerance = "0.5%"\n'), store)  # fmt: skip
    assert code == 1
    assert got["as-scored"]["verdict"] == "supported" and got["tenth-faster"]["verdict"] == "contradicted"
    assert got["as-scored"]["number"]["value"] == pytest.approx(minutes * 60, rel=1e-6)
    assert "the tolerance alone decides" in got["as-scored"]["reason"]


@pytest.mark.parametrize(
    ("body", "says"),
    [("version = 1\n[[claim]]\nid = ", "not valid TOML"),
     ('version = 1\n[[claim]]\nid = "x"\nsays = "s"\nmeasure = "speed"\nruns = "a"\nrelation = "about"\n', "line 2"),
     ('version = 1\n[[claim]]\nid = "x"\nsays = "s"\nmeasure = "speedup"\nruns = "a"\nrelation = "at_least"\nvalue = 2\n',
      "needs its point"),
     ('version = 1\n[[claim]]\nid = "x"\nsays = "s"\nmeasure = "speedup"\nruns = "a"\nat = { workers = 2 }\n'
      'relation = "about"\nvalue = 2\n', "'about' needs a tolerance"),
     ('version = 2\n[[claim]]\nid = "x"\n', "version 2")],
)  # fmt: skip
def test_a_malformed_claims_file_is_named_with_its_line_and_fix(tmp_path: Path, body: str, says: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(body)
    got = cli("claims", "check", path, "--store", tmp_path / "none.duckdb")
    assert got.returncode == 2 and says in got.stderr and "fix:" in got.stderr, got.stderr
    assert not (tmp_path / "none.duckdb").exists()


def test_lock_names_the_claims_whose_runs_changed(examples: Path, tmp_path: Path) -> None:
    file = _write(tmp_path, 'id = "a"\nsays = "A is faster"\nmeasure = "time_to_accuracy"\nruns = "compare-base"\n'
                            'than = "compare-loaders"\nrelation = "faster"\n')  # fmt: skip
    assert cli("claims", "lock", file, "--store", examples).returncode == 0
    locked = json.loads((tmp_path / "claims.toml.lock.json").read_text())
    assert locked["claims"]["a"]["n"] == 12
    assert _check(file, examples)[1]["a"]["changed_since_lock"] is None
    file.write_text(file.read_text().replace('"compare-loaders"', '"compare-again"'))
    changed = _check(file, examples)[1]["a"]["changed_since_lock"]
    assert "6 run(s) landed since" in changed and "6 run(s) gone" in changed


def test_the_latex_table_says_each_number_s_unit_statistic_and_n(examples: Path) -> None:
    got = cli("claims", "check", CLAIMS / "compare.toml", "--store", examples, "-f", "latex")
    assert got.returncode == 1 and got.stdout.startswith(r"\begin{tabular}") and r"\bottomrule" in got.stdout
    rows = {line.split(" & ")[0]: line for line in got.stdout.splitlines() if line.endswith(r"\\")}
    assert (
        "x [1.654, 3.697] (n = 6; ratio of medians) & supported"
        in rows["Training with the default data loader is faster than with extra loader workers"]
    )
    assert rows["Two DDP workers train digits in under 2 s"].endswith(
        r" s (n = 2; median) & cannot verify \\"
    )


PAPER = r"""\documentclass{article}
\input{numbers}
\begin{document}
Two workers train digits in \hs{digits-ddp-example/2/time_to_train} (n = \hs{digits-ddp-example/2/time_to_train/n}),
a speedup of \hs{digits-ddp-example/2/speedup} (rules: \hs{digits-ddp-example/2/speedup/rules}).
% \hs{commented/out} is no use
\end{document}
"""


def _paper(tmp: Path, store: Path, campaign: str, text: str) -> Path:
    report = tmp / "report.pdf"
    got = cli("report", "--store", store, "--campaign", campaign, "-o", report)
    assert got.returncode == 0, got.stderr
    paper = tmp / "paper" / "paper.tex"
    paper.parent.mkdir(exist_ok=True)
    (paper.parent / "numbers.tex").write_bytes((tmp / "report_files" / "numbers.tex").read_bytes())
    paper.write_text(text)
    return paper


def _compiles(paper: Path) -> str:
    import shutil
    import subprocess

    from tests.tools import require

    require(shutil.which("pdflatex"), "pdflatex", "apt-get install texlive-latex-base")
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", paper.name], cwd=paper.parent,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    text = subprocess.run(
        ["pdftotext", paper.with_suffix(".pdf"), "-"], capture_output=True, text=True
    ).stdout
    return " ".join(text.split())


def test_a_paper_s_numbers_come_from_numbers_tex_and_a_changed_one_is_flagged(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    first = [p for p in sorted(EXAMPLE.iterdir()) if "-r0-" in p.name]  # one run a point, then the rest land
    assert cli("ingest", *first, "--store", store).returncode == 0
    paper = _paper(tmp_path, store, "digits-ddp-example", PAPER)
    (two,) = [p for p in first if "-2w-" in p.name]
    ranks = [[json.loads(line) for line in f.open()] for f in sorted(two.glob("events-rank*.jsonl"))]
    # the run's time to train from its own events: the first rank's start to the last rank's stop
    seconds = max(e["time"] for evs in ranks for e in evs if e["kind"] == "run_stop") - min(
        e["time"] for evs in ranks for e in evs if e["kind"] == "run_start"
    )
    shown = _compiles(paper)
    assert f"Two workers train digits in {seconds:.3g} s (n = 1)" in shown, shown
    got = cli("claims", "check", paper, "--store", store, "-f", "json")
    assert got.returncode == 0, got.stdout + got.stderr
    used = {m["key"]: m for m in json.loads(got.stdout)["macros"]}
    assert set(used) == {"digits-ddp-example/2/time_to_train", "digits-ddp-example/2/time_to_train/n",
                         "digits-ddp-example/2/speedup", "digits-ddp-example/2/speedup/rules"}  # fmt: skip
    assert {m["verdict"] for m in used.values()} == {"unchanged"}
    assert cli("ingest", EXAMPLE, "--store", store).returncode == 0  # the second repetitions land
    got = cli("claims", "check", paper, "--store", store, "-f", "json")
    assert got.returncode == 1
    changed = {m["key"]: m for m in json.loads(got.stdout)["macros"]}["digits-ddp-example/2/time_to_train"]
    assert changed["verdict"] == "changed" and "n = 1 then, 2 now" in changed["reason"], changed


def test_a_do_not_quote_number_carries_its_mark_in_the_paper(tmp_path: Path) -> None:
    store = build(tmp_path, {"runs": BUSY, "campaign": "digits-scaling", "spec": SPEC})
    paper = _paper(tmp_path, store, "digits-scaling",
                   PAPER.replace("digits-ddp-example", "digits-scaling").replace("/time_to_train", "/throughput"))  # fmt: skip
    assert "do not quote: error-severity HS209" in _compiles(paper)
    got = cli("claims", "check", paper, "--store", store, "-f", "json")
    verdicts = {m["key"]: m["verdict"] for m in json.loads(got.stdout)["macros"]}
    assert got.returncode == 1 and verdicts["digits-scaling/2/speedup"] == "not quotable", verdicts


def test_a_paper_without_numbers_tex_or_with_an_unknown_key_is_told(examples: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.tex"
    bare.write_text("\\documentclass{article}\\begin{document}\\hs{x}\\end{document}\n")
    got = cli("claims", "check", bare, "--store", examples)
    assert got.returncode == 2 and "inputs no numbers.tex" in got.stderr and "fix:" in got.stderr
    (tmp_path / "numbers.tex").write_text("\\hsdef{a/1/throughput}{1 samples/s}{fp=0;n=1;rules=}\n")
    bare.write_text("\\input{numbers}\\hs{a/1/throughput} \\hs{b/2/speedup}\n")
    got = cli("claims", "check", bare, "--store", examples, "-f", "json")
    verdicts = {m["key"]: m["verdict"] for m in json.loads(got.stdout)["macros"]}
    assert got.returncode == 1 and verdicts == {"a/1/throughput": "gone", "b/2/speedup": "undefined"}


def test_the_artifact_appendix_is_written_from_the_store(examples: Path, tmp_path: Path) -> None:
    target = tmp_path / "appendix"
    got = cli("report", "--store", examples, "--appendix", target, "--claims", CLAIMS / "compare.toml")
    assert got.returncode == 0, got.stderr
    md, tex = target.with_suffix(".md").read_text(), target.with_suffix(".tex").read_text()
    assert "Coverage: 4 of 4 claims are backed by runs in the store" in md
    verdicts = _check(CLAIMS / "compare.toml", examples)[1]
    for i, (ident, claim) in enumerate(verdicts.items(), start=1):
        assert f"C{i}: {claim['says']} [{claim['verdict']}]" in md
        assert f"## C{i}: {ident}" in md
    # the commands as the runs recorded them (run_start), each once with its count, interpreter as "python"
    base = sorted(p for p in COMPARE_RUNS.iterdir() if p.name.startswith("compare-base-"))
    argv = next(json.loads(line) for line in (base[0] / "events-rank0.jsonl").open() if '"run_start"' in line)
    argv = argv["command"]
    assert "--loader-workers 0" in " ".join(argv)
    assert f"Command ({len(base)} runs): `python -m honestscale.runners.torch_ddp" in md
    assert str(REPO) not in md + tex and "12 runs (0 tuning)" in md
    got = cli("report", "--store", examples, "--appendix", target)
    assert got.returncode == 2 and "--claims" in got.stderr
    doc = tmp_path / "ad.tex"
    doc.write_text("\\documentclass{article}\n\\begin{document}\n\\input{appendix.tex}\n\\end{document}\n")
    assert "Artifact description and evaluation" in _compiles(doc)


def test_the_report_has_a_claims_section_when_given_claims(examples: Path, tmp_path: Path) -> None:
    import subprocess

    pdf = tmp_path / "r.pdf"
    got = cli("report", "--store", examples, "--campaign", "compare-base", "--claims", CLAIMS / "compare.toml",
              "-o", pdf)  # fmt: skip
    assert got.returncode == 0, got.stderr
    text = " ".join(subprocess.run(["pdftotext", pdf, "-"], capture_output=True, text=True).stdout.split())
    section = text[text.rindex("The paper's claims") :]
    verdicts = _check(CLAIMS / "compare.toml", examples)[1]
    for ident, claim in verdicts.items():
        assert ident in section and claim["verdict"] in section, ident
    assert "95 % interval [1.654, 3.697]; n = 6" in section
    plain = tmp_path / "plain.pdf"
    assert cli("report", "--store", examples, "--campaign", "compare-base", "-o", plain).returncode == 0
    assert (
        "The paper's claims"
        not in subprocess.run(["pdftotext", plain, "-"], capture_output=True, text=True).stdout
    )


def test_the_mlperf_example_claims(tmp_path: Path) -> None:
    from tests.mlperf import DATA

    dell = DATA / "mlperf-training-v1x" / "v3.1" / "Dell" / "results" / "2xXE8640x4H100-SXM-80GB" / "resnet"
    require(dell.is_dir(), str(dell), "../shared/data beside the repository")
    store = tmp_path / "s.duckdb"
    assert (
        cli("ingest", dell, REPO / "tests" / "data" / "mlperf-v0.7-nvidia", "--store", store).returncode == 0
    )
    code, got = _check(CLAIMS / "mlperf.toml", store)
    assert code == 1
    assert {k: v["verdict"] for k, v in got.items()} == {
        "dell-resnet-as-scored": "supported",
        "dell-resnet-press": "contradicted",
        "dgx-superlinear": "not quotable",  # HS209: the 16-GPU point ran on other accelerators (DGX-2H)
    }
    assert "HS209" in got["dgx-superlinear"]["reason"]


def test_a_claim_quoting_the_best_run_is_told_which_statistic_the_data_gives(
    examples: Path, tmp_path: Path
) -> None:
    best = min(_tta_by_campaign()["compare-base"])
    claim = ('id = "best"\nsays = "trains to 95 % in a typical run"\nmeasure = "time_to_accuracy"\n'
             f'runs = "campaign=compare-base"\nat = {{ workers = 1 }}\nrelation = "about"\nvalue = {best!r}\n'
             'tolerance = "1%"\nstatistic = "best"\n')  # fmt: skip
    code, got = _check(_write(tmp_path, claim), examples)
    note = next(e for e in got["best"]["evidence"] if e.startswith("the claim names the best run"))
    assert got["best"]["verdict"] != "supported" and code != 0, got["best"]
    assert "the store's number is median of runs" in note and "not a typical run's" in note, note
    assert got["best"]["number"]["value"] == pytest.approx(
        statistics.median(_tta_by_campaign()["compare-base"])
    )


def _ttt_by_campaign() -> dict[str, list[float]]:
    """Each compare example run's time to train from its events: run_start to run_stop (a few lines of json)."""
    out: dict[str, list[float]] = {}
    for folder in sorted(COMPARE_RUNS.iterdir()):
        events = [json.loads(line) for line in (folder / "events-rank0.jsonl").open()]
        start = next(e for e in events if e["kind"] == "run_start")
        stop = next(e for e in events if e["kind"] == "run_stop")
        out.setdefault(start["campaign"], []).append(stop["time"] - start["time"])
    return out


def test_an_ordering_by_time_to_train_is_judged_where_every_run_reached_its_target(
    examples: Path, tmp_path: Path
) -> None:
    """Every run of the two campaigns reached its target, so compare decides on the time to accuracy; a claim about
    the time to train was 'cannot verify: not every run reached its target' (false). It is judged on the time to
    train, whose medians are the events' own."""
    file = _write(tmp_path, 'id = "ttt"\nsays = "the base trains faster than with loaders"\n'
                            'measure = "time_to_train"\nruns = "compare-base"\nthan = "compare-loaders"\n'
                            'relation = "faster"')  # fmt: skip
    _, got = _check(file, examples)
    ttt = _ttt_by_campaign()
    want = statistics.median(ttt["compare-loaders"]) / statistics.median(ttt["compare-base"])
    assert got["ttt"]["verdict"] in ("supported", "contradicted"), got["ttt"]["reason"]
    assert "not every run reached" not in got["ttt"]["reason"]
    assert got["ttt"]["number"]["value"] == pytest.approx(want, rel=1e-3)
    assert got["ttt"]["number"]["name"].startswith("time to train")


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('value = inf\nunit = "min"', "value = inf min is not a finite number"),
        ('value = nan\nunit = "min"', "value = nan min is not a finite number"),
        ('value = 1e308\nunit = "min"', "value = 1e+308 min is inf s, not a finite number"),
        ("value = -3.0", "value = -3.0 is negative: a time to train is 0 or more"),
    ],
)
def test_a_value_no_claim_can_hold_is_a_usage_error(
    examples: Path, tmp_path: Path, line: str, says: str
) -> None:
    file = _write(tmp_path, 'id = "v"\nsays = "x"\nmeasure = "time_to_train"\nruns = "compare-base"\n'
                            f'relation = "about"\ntolerance = "5%"\n{line}')  # fmt: skip
    got = cli("claims", "check", file, "--store", examples)
    assert got.returncode == 2 and says in got.stderr and "line 2" in got.stderr, got.stderr


def test_a_selector_value_may_hold_a_comma_when_quoted_and_names_are_shown_escaped(tmp_path: Path) -> None:
    """MangoBoost's system is named with commas: quoted, it is one value. A says with a bidirectional control
    reaches the terminal as its escape, never raw."""
    from tests.mlperf import data_root

    mango = sorted((data_root("mlperf-training-v06-v5x") / "v5.1" / "MangoBoost" / "results").glob("*/*"))
    assert mango, "the v5.1 MangoBoost submission of ../shared/data"
    store = tmp_path / "s.duckdb"
    assert cli("ingest", mango[0], "--store", store).returncode == 0
    (system,) = {r["system"] for r in json.loads(cli("runs", "--store", store, "-f", "json").stdout)}
    assert "," in system
    file = _write(tmp_path, f'id = "m"\nsays = "MangoBoost \\u202eevil"\nmeasure = "mlperf_score"\n'
                            f'runs = \'source=mlperf,system="{system}"\'\nrelation = "at_least"\nvalue = 0.0')  # fmt: skip
    got = cli("claims", "check", file, "--store", store)
    assert got.returncode == 0, got.stdout + got.stderr
    assert "\\u202e" in got.stdout and "\u202e" not in got.stdout


def test_a_locked_claim_whose_runs_changed_exits_1_unless_drift_is_allowed(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    some = sorted(COMPARE_RUNS.glob("compare-base-*"))
    assert (
        cli("ingest", *some[:5], *sorted(COMPARE_RUNS.glob("compare-loaders-*")), "--store", store).returncode
        == 0
    )
    file = _write(tmp_path, 'id = "o"\nsays = "base is faster"\nmeasure = "time_to_accuracy"\nruns = "compare-base"\n'
                            'than = "compare-loaders"\nrelation = "faster"')  # fmt: skip
    before = cli("claims", "check", file, "--store", store).returncode
    assert cli("claims", "lock", file, "--store", store).returncode == 0
    assert cli("ingest", some[5], "--store", store).returncode == 0  # one more run lands
    drifted = cli("claims", "check", file, "--store", store, "-f", "json")
    assert drifted.returncode == 1 and json.loads(drifted.stdout)["drifted"] == ["o"]
    allowed = cli("claims", "check", file, "--store", store, "--allow-drift")
    assert allowed.returncode == before and "allowed (--allow-drift)" in allowed.stderr


def _paper_using(tmp: Path, numbers: Path, keys: list[str]) -> Path:
    (tmp / "numbers.tex").write_text(numbers.read_text())
    body = " ".join(f"\\hs{{{k}}}" for k in keys)
    paper = tmp / "paper.tex"
    paper.write_text(
        f"\\documentclass{{article}}\n\\input{{numbers}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n"
    )
    return paper


def test_paper_keys_of_runs_without_a_campaign_survive_and_a_moved_one_is_renamed(
    mlperf: Path, tmp_path: Path
) -> None:
    """MLPerf logs ingested without --campaign: every number was "gone" right after the report wrote it. They are
    found again; when another family of runs lands, a key that now names its number under a longer name is said
    renamed, with the new key, never read as another number."""
    store = tmp_path / "s.duckdb"
    assert cli("ingest", mlperf / "DellEMC", "--store", store).returncode == 0
    assert cli("report", "--store", store, "-o", tmp_path / "r.pdf").returncode == 0
    numbers = tmp_path / "r_files" / "numbers.tex"
    keys = ["runs/4/time_to_train", "runs/8/speedup", "runs/16/mlperf_score"]
    assert all(f"\\hsdef{{{k}}}" in numbers.read_text() for k in keys)
    paper = _paper_using(tmp_path, numbers, keys)
    got = json.loads(cli("claims", "check", paper, "--store", store, "-f", "json").stdout)
    assert [v["verdict"] for v in got["macros"]] == ["unchanged"] * 3, got
    assert cli("ingest", mlperf / "Google", "--store", store).returncode == 0  # another family lands
    again = json.loads(cli("claims", "check", paper, "--store", store, "-f", "json").stdout)
    by_key = {v["key"]: v for v in again["macros"]}
    assert by_key["runs/4/time_to_train"]["verdict"] == "renamed", by_key
    assert "is now \\hs{runs.resnet-imagenet-" in by_key["runs/4/time_to_train"]["reason"]
    assert again["exit_code"] == 1


def test_one_analysis_serves_every_claim_about_the_same_campaigns(
    examples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check analyses each set of campaigns its point claims are about once (30 claims on the MLPerf rounds:
    29.2 s -> 3.4 s), and every verdict and number is what judging the claim alone gives."""
    import honestscale.claims._numbers as numbers_module
    from honestscale import claims
    from honestscale.judged import judged

    file = _write(tmp_path, *(f'id = "c{i}"\nsays = "x"\nmeasure = "time_to_train"\nruns = "{c}"\n'
                              f'relation = "at_most"\nvalue = {1 + i % 5}.0'
                              for i, c in enumerate(["compare-base", "compare-loaders"] * 6)))  # fmt: skip
    parsed = claims.load(file)
    view = judged(examples).view
    real, calls = numbers_module.analyse, []  # type: ignore[attr-defined]

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(numbers_module, "analyse", counted)
    shared = [v.as_json() for v in claims.check(view, parsed)]
    assert len(calls) == 2  # one per campaign
    alone = [claims.judge(view, c, f"{file} line {c.line}").as_json() for c in parsed.claims]
    assert shared == alone and len(calls) == 2 + len(parsed.claims)


def test_an_ordering_at_one_scale_compares_the_runs_of_that_scale(tmp_path: Path) -> None:
    """ "Ours trains faster than theirs on 2 workers": `at` narrows both sides to that point, so the two campaigns
    (each at 1 and 2 workers, 6 runs a point) pair into one setup; the ratio is the two sides' median times at 2
    workers, as a few lines of json over the events compute it."""
    from honestscale.events import EventWriter

    now = [1_000.0]
    seconds = {("ours", 1): 10.0, ("ours", 2): 6.0, ("theirs", 1): 10.5, ("theirs", 2): 9.0}
    for (campaign, workers), base in seconds.items():
        for rep in range(6):
            start = now[0]
            for rank in range(workers):  # every rank writes its events (HS213: no rank missing)
                now[0] = start
                with EventWriter(
                    tmp_path / "runs", f"{campaign}-{workers}w-r{rep}", rank, clock=lambda: now[0]
                ) as w:
                    w.run_start(framework="torch", campaign=campaign, world_size=workers, nodes=1,
                                accelerators_per_node=0, model="mlp", dataset="digits", global_batch_size=64,
                                local_batch_size=64 // workers, stop_criterion="epochs", stop_value=1, seed=rep)  # fmt: skip
                    now[0] = start + base * (1 + 0.01 * rep)
                    w.eval(split="validation", metric="accuracy", value=0.95, epoch=0)  # HS101: quality kept
                    w.run_stop("success")
            now[0] += 100.0
    store = tmp_path / "s.duckdb"
    assert cli("ingest", tmp_path / "runs", "--store", store).returncode == 0
    claim = ('id = "two"\nsays = "ours trains faster on 2 workers"\nmeasure = "time_to_train"\nruns = "ours"\n'
             'than = "campaign=theirs"\nat = { workers = 2 }\nrelation = "faster"\n')  # fmt: skip
    code, got = _check(_write(tmp_path, claim), store)
    times: dict[str, list[float]] = {}
    for path in sorted((tmp_path / "runs").glob("*-2w-*/events-rank0.jsonl")):  # both ranks stop together
        events = [json.loads(line) for line in path.open()]
        times.setdefault(events[0]["campaign"], []).append(events[-1]["time"] - events[0]["time"])
    expected = statistics.median(times["theirs"]) / statistics.median(times["ours"])
    assert got["two"]["verdict"] == "supported" and code == 0, (got["two"]["reason"], got["two"]["evidence"])
    assert got["two"]["number"]["value"] == pytest.approx(expected, rel=1e-6)
    assert (
        "A = campaign=ours,workers=2 (6 runs), B = campaign=theirs,workers=2 (6 runs)"
        in got["two"]["evidence"]
    )
