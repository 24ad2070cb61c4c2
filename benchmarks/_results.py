"""Every benchmark figure's history: ``--record`` appends it to ``benchmarks/results.jsonl`` (committed), and each run
prints its figures beside the last ones recorded, saying when one is worse by more than the run-to-run spread.

A figure is one number a benchmark prints (a ratio against a reference measured in the same run, a cost in µs, a
time), with the spread it measured between its own repetitions (the same unit), the direction that is better, its
goal, and what the machine was doing: its load averages at the start and the end and its CPUs (a shared machine's
load moves every figure). The README's and docs/benchmarks.md's tables of figures are rendered from the file
(``python benchmarks/results.py --write``) and a test checks that they agree with it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.jsonl"


@dataclass(frozen=True)
class Figure:
    """One figure of one benchmark run."""

    benchmark: str  # the script's name: "ingest", "runner_overhead", ...
    figure: str  # what it is, as a reader would say it: "ingest / DuckDB read_json (median of 3)"
    value: float
    unit: str  # "x" for a ratio, "us", "ms", "s", "MiB", "" for an exponent
    spread: float  # the run-to-run spread this run measured, same unit (half the range of its repetitions, or
    # the half width of its interval): a change smaller than it is noise
    better: Literal["lower", "higher"]
    goal: str = ""  # "<= 2.0", "" where there is none
    detail: str = (
        ""  # what a reader needs beside the number (its interval, per-step cost, the worst case's name)
    )


@dataclass(frozen=True)
class Entry:
    """A figure as recorded: when, on which commit, on which machine and in what state."""

    figure: Figure
    commit: str
    date: str
    load: tuple[float, float, float]  # load averages (1, 5, 15 min) when the benchmark started
    load_end: tuple[float, float, float]
    cpus: int
    args: list[str] = field(default_factory=list)

    def line(self) -> str:
        return json.dumps({**asdict(self.figure), **{k: v for k, v in asdict(self).items() if k != "figure"}})

    @staticmethod
    def parse(text: str, where: str) -> Entry:
        try:
            raw: dict[str, Any] = json.loads(text)
            fig = {k: raw.pop(k) for k in Figure.__dataclass_fields__ if k in raw}
            return Entry(
                Figure(**fig),
                commit=str(raw["commit"]),
                date=str(raw["date"]),
                load=_triple(raw["load"]),
                load_end=_triple(raw["load_end"]),
                cpus=int(raw["cpus"]),
                args=[str(a) for a in raw.get("args", [])],
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"{where}: not a benchmark figure ({exc}); fix or remove the line") from None


def _triple(v: Sequence[float]) -> tuple[float, float, float]:
    a, b, c = (float(x) for x in v)
    return a, b, c


def history(path: Path = RESULTS) -> list[Entry]:
    """Every recorded figure, oldest first."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [Entry.parse(t, f"{path}:{i}") for i, t in enumerate(lines, 1) if t.strip()]


def latest(entries: Iterable[Entry]) -> dict[tuple[str, str], list[Entry]]:
    """Per (benchmark, figure): its entries, newest first."""
    out: dict[tuple[str, str], list[Entry]] = {}
    for e in entries:
        out.setdefault((e.figure.benchmark, e.figure.figure), []).insert(0, e)
    return out


def commit() -> str:
    """The commit of the code measured (the package), with ``+changes`` where it differs from that commit."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=HERE.parent, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short=10", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "honestscale", "pyproject.toml")
    return head + ("+changes" if dirty else "")


def worse(new: Figure, old: Figure) -> float | None:
    """How much worse ``new`` is than ``old`` where that is more than either run's spread, else None."""
    delta = new.value - old.value if new.better == "lower" else old.value - new.value
    return delta if delta > max(new.spread, old.spread) else None


def met(f: Figure) -> str:
    """Whether the figure meets its goal: "yes"; "within its spread" where it does but the run does not show it (a
    value its spread away, toward the goal's wrong side, would miss it); "NO"; "" where it has none or the goal is not a
    bound. A figure that is an interval's bound (its name says so: "upper 95 % bound") is judged as it is: its
    uncertainty is in it already, and its spread is that interval's half width."""
    found = re.match(r"\s*(<=|<|>=|>)\s*([0-9.]+)", f.goal)
    if not found:
        return ""
    op, bound = found[1], float(found[2])

    def ok(value: float) -> bool:
        return {"<=": value <= bound, "<": value < bound, ">=": value >= bound, ">": value > bound}[op]

    if not ok(f.value):
        return "NO"
    if "bound" in f.figure:
        return "yes"
    return (
        "yes" if ok(f.value + f.spread if op.startswith("<") else f.value - f.spread) else "within its spread"
    )


def _fmt(value: float, unit: str) -> str:
    digits = 3 if unit in ("x", "") else 1 if abs(value) >= 10 else 2
    return f"{value:,.{digits}f}{'' if unit in ('x', '') else ' '}{unit}"


class Session:
    """A benchmark run's figures: the machine's state at its start, then :meth:`finish` with what it measured."""

    def __init__(self, benchmark: str) -> None:
        self.benchmark = benchmark
        self.load = os.getloadavg()
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")

    def finish(
        self, figures: Sequence[Figure], record: bool, path: Path = RESULTS, measured: str | None = None
    ) -> list[Entry]:
        """Print each figure beside the last one recorded (worse beyond the spread: said); with ``record``, append.
        ``measured``: the commit the figures are of, where it is not the checkout's (a copy measured earlier)."""
        past = latest(history(path))
        measured, load_end = (
            measured or commit(),
            _triple(os.getloadavg()),
        )  # once for the run, not per figure
        entries = [
            Entry(f, measured, self.started, _triple(self.load), load_end, os.cpu_count() or 1, sys.argv[1:])
            for f in figures
        ]
        load = ", ".join(f"{x:.1f}" for x in self.load)
        print(
            f"\nmachine: {entries[0].cpus} CPUs, load average {load} at the start "
            f"({', '.join(f'{x:.1f}' for x in entries[0].load_end)} at the end)"
        )
        for e in entries:
            f = e.figure
            said = f"{f.figure}: {_fmt(f.value, f.unit)} (± {_fmt(f.spread, f.unit)})"
            before = past.get((f.benchmark, f.figure))
            if before:
                last = before[0]
                said += f"; last recorded {_fmt(last.figure.value, f.unit)} ({last.commit}, {last.date[:10]})"
                if (by := worse(f, last.figure)) is not None:
                    said += f": WORSE by {_fmt(by, f.unit)}, more than the spread of either run"
            print(said)
        if record:
            with path.open("a", encoding="utf-8") as out:
                out.writelines(e.line() + "\n" for e in entries)
            print(
                f"recorded in {path.relative_to(HERE.parent) if path.is_relative_to(HERE.parent) else path}"
            )
        return entries


BEGIN, END = "<!-- figures: begin (python benchmarks/results.py --write) -->", "<!-- figures: end -->"


def table(entries: Iterable[Entry], brief: bool = False) -> str:
    """The latest figure of every benchmark as a markdown table: with the one before it, its spread, the machine's
    load and the detail (docs/benchmarks.md); ``brief``: the figures with a goal, the value, goal and date (README)."""
    if brief:
        rows = ["| benchmark | figure | latest | goal | met | measured |", "|---|---|---|---|---|---|"]
    else:
        rows = [
            "| benchmark | figure | latest | spread | goal | met | measured | load (1 min) at start | the one before |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
    for (bench, name), es in sorted(latest(entries).items()):
        e, f = es[0], es[0].figure
        if brief:
            if f.goal:
                rows.append(
                    f"| `{bench}` | {name} | **{_fmt(f.value, f.unit)}** | {f.goal} | {met(f)} | {e.date[:10]} |"
                )
            continue
        before = f"{_fmt(es[1].figure.value, f.unit)} ({es[1].commit})" if len(es) > 1 else ""
        detail = f"; {f.detail}" if f.detail else ""
        rows.append(
            f"| `{bench}` | {name}{detail} | **{_fmt(f.value, f.unit)}** | ± {_fmt(f.spread, f.unit)} | {f.goal} | {met(f)} | "
            f"{e.date[:10]}, {e.commit}, {e.cpus} CPUs | {e.load[0]:.1f} | {before} |"
        )
    return "\n".join(rows)


def rendered(text: str, entries: Iterable[Entry], brief: bool = False) -> str:
    """``text`` with its figures' block (between BEGIN and END) rendered from ``entries``."""
    head, sep, rest = text.partition(BEGIN)
    if not sep or END not in rest:
        raise SystemExit(f"no figures block: put {BEGIN} and {END} where the table goes")
    return head + BEGIN + "\n" + table(entries, brief) + "\n" + END + rest.split(END, 1)[1]


# where the figures are quoted, and how
QUOTED = {"README.md": True, "docs/benchmarks.md": False}
