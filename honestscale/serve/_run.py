"""A run as its page shows it: setup, status, the step-time breakdown along the run per rank (warm-up and stalls
marked), evaluations over time, system samples, lost events and the quarantined lines of its files.

The figures are drawn here with matplotlib (the report's style and part colours), as SVG with a hover text on every
marked point, and zoom in the browser (``static/dashboard.js``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import polars as pl
from matplotlib.figure import Figure

from honestscale.analysis.energy import NOT_RECORDED
from honestscale.judged import Judged, RunRecord, energy_text, run_record, steady_text, step_shares
from honestscale.report import PARTS, STYLE, mark, to_svg
from honestscale.store import Connection, queries
from honestscale.store import dashboard as reads

MAX_RANKS_DRAWN = 8  # ranks side by side; more are listed in the table, the slowest and fastest drawn


@dataclass
class RunPage:
    """The run's record (what ``show`` prints) and what only the page draws: the steps, evaluations and system
    samples along the run, and the quarantined lines of its files."""

    record: RunRecord
    quarantined: int
    quarantine: list[dict[str, object]]
    ranks: int = 0
    figures: list[dict[str, str]] = field(default_factory=list)  # name, caption, svg
    drawn_ranks: list[int] = field(default_factory=list)
    steps: int = 0
    stall_steps: int = 0
    warmup_steps: int = 0

    @property
    def energy(self) -> str:
        """The energy to train in ``show``'s words."""
        return energy_text(self.record.energy_to_train) if self.record.energy_to_train else NOT_RECORDED

    @property
    def steady(self) -> str | None:
        """The steady state of the first rank's steps in ``show``'s words (None without step events)."""
        ss = self.record.steady_state
        return None if ss is None else steady_text(ss)

    @property
    def step_rows(self) -> list[tuple[str, ...]]:
        """Every rank's step split as ``show``'s table gives it (columns ``STEP_COLUMNS``)."""
        return [step_shares(s) for s in self.record.step_breakdown]

    def as_json(self) -> dict[str, object]:
        """``show --format json``'s record, with the page's counts and quarantined lines."""
        return self.record.as_json() | {
            "quarantined": self.quarantined,
            "quarantine": self.quarantine,
            "steps": self.steps,
            "stall_steps": self.stall_steps,
            "warmup_steps": self.warmup_steps,
        }


@dataclass
class _Read:
    record: RunRecord
    steps: pl.DataFrame
    system: pl.DataFrame
    evals: pl.DataFrame
    quarantined: int
    quarantine: pl.DataFrame
    started_s: float | None  # the run's start, epoch seconds: where the evaluations' time axis begins


def campaign_of(con: Connection, run_id: str) -> tuple[str | None] | None:
    """The run's campaign (None within: a run of no campaign), or None where the store has no such run."""
    row = queries.run(con, run_id)
    return None if row.is_empty() else (row["campaign"][0],)


def read(con: Connection, run_id: str, j: Judged) -> _Read:
    """Everything the page needs, in one short read of the store: the run's record judged with ``j`` (its
    campaign's judged model, or the runs of no campaign's) and what the page draws."""
    count, lines = reads.run_quarantine(con, run_id)
    return _Read(
        run_record(con, run_id, j),
        reads.run_steps(con, run_id),
        reads.run_system(con, run_id),
        queries.evals(con, run_id),
        count,
        lines,
        queries.run(con, run_id)["started_at"][0],
    )


def _ranks_drawn(steps: pl.DataFrame) -> list[int]:
    ranks = sorted(set(steps["rank"].to_list()))
    if len(ranks) <= MAX_RANKS_DRAWN:
        return ranks
    by = steps.group_by("rank").agg(pl.col("t_total").mean()).sort("t_total")["rank"].to_list()
    half = MAX_RANKS_DRAWN // 2
    return sorted(by[:half] + by[-half:])


def _per_event(steps: pl.DataFrame) -> int:
    """The most steps one step event covers: 1 where each event is one step, a log's interval otherwise (its
    time is the interval's, not a step's)."""
    got = steps["iterations"].max() if "iterations" in steps.columns else None
    return int(got) if isinstance(got, int | float) else 1


def _steps_figure(steps: pl.DataFrame, ranks: list[int], per: int) -> Figure:
    """Each rank's step events along the run; ``per``: the most steps one event covers (``_per_event``)."""
    fig, axes = plt.subplots(
        1, len(ranks), figsize=(min(9.5, 2.2 + 2.0 * len(ranks)), 2.6), sharey=True, squeeze=False
    )
    for ax, rank in zip(axes[0], ranks, strict=True):
        s = steps.filter(pl.col("rank") == rank)
        x = s["first_step"].to_list()
        bottom = [0.0] * len(x)
        for part, color in PARTS:
            column = f"t_{part}"
            vals = [v or 0.0 for v in s[column].to_list()]
            if any(vals):
                ax.fill_between(
                    x,
                    bottom,
                    [b + v for b, v in zip(bottom, vals, strict=True)],
                    step="post",
                    color=color,
                    lw=0,
                    label=part,
                )
                bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        total = [v or 0.0 for v in s["t_total"].to_list()]
        ax.plot(x, total, color="black", lw=0.6, drawstyle="steps-post", label="step (mean)")
        # each bucket that holds warm-up shaded on its own: a resumed launch's start-up is warm-up mid-run, and
        # one span from the first to the last would shade the steps between as warm-up too
        warm = [(xv, n) for xv, n, w in zip(x, s["steps"].to_list(), s["warmup"].to_list(), strict=True) if w]
        for i, (xv, n) in enumerate(warm):
            ax.axvspan(xv, xv + n, color="#bdbdbd", alpha=0.5, lw=0, label="warm-up" if i == 0 else None)
        stalled = s.filter(pl.col("stalls") > 0)
        if not stalled.is_empty():
            line = ax.plot(
                stalled["first_step"].to_list(),
                stalled["slowest"].to_list(),
                "v",
                color="#de2d26",
                ms=4,
                label="stall (> Q3 + 1.5 IQR)",
            )[0]
            mark(
                fig,
                line,
                [
                    f"rank {rank}, steps {r['first_step']}–{r['first_step'] + r['steps'] - 1}: {r['stalls']} stall(s), "
                    f"slowest {r['slowest']:.4g} s against a median step of {r['median_step']:.4g} s "
                    f"(fence {r['fence']:.4g} s)"
                    for r in stalled.to_dicts()
                ],
            )
        ax.set_title(f"rank {rank}")
        ax.set_xlabel(f"logging interval (of up to {per} steps)" if per > 1 else "step")
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel("seconds per interval" if per > 1 else "seconds per step")
    axes[0][0].legend(frameon=False, ncols=4, loc="lower left", bbox_to_anchor=(0.0, 1.12), fontsize=6)
    return fig


def _evals_figure(evals: pl.DataFrame, t0: float) -> Figure:
    fig, ax = plt.subplots(figsize=(4.2, 2.4))
    for (split, metric), g in evals.filter(pl.col("rank") == evals["rank"].min()).group_by(
        ["split", "metric"]
    ):
        xs = [t - t0 for t in g["time"].to_list()]
        line = ax.plot(xs, g["value"].to_list(), "o-", ms=3, lw=1, label=f"{split} {metric}")[0]
        mark(
            fig,
            line,
            [
                f"{split} {metric} {v:.4g} at {x:.1f} s (epoch {e})"
                for x, v, e in zip(xs, g["value"].to_list(), g["epoch"].to_list(), strict=True)
            ],
        )
    ax.set_xlabel("seconds since the run started")
    ax.set_ylabel("value")
    ax.legend(frameon=False, fontsize=6)
    return fig


SYSTEM = (
    ("power_w", "power [W]", 1.0),
    ("accel_util", "accelerator utilisation [%]", 1.0),
    ("accel_mem_bytes", "accelerator memory [GiB]", 2**30),
    ("cpu_percent", "CPU [%]", 1.0),
    ("rss_bytes", "process memory [GiB]", 2**30),
    ("host_load", "host load", 1.0),
)


def _system_figure(system: pl.DataFrame) -> Figure | None:
    shown = [(c, label, div) for c, label, div in SYSTEM if system[c].drop_nulls().len() > 0]
    if not shown:
        return None
    fig, axes = plt.subplots(1, len(shown), figsize=(min(9.5, 2.4 * len(shown)), 2.2), squeeze=False)
    for ax, (column, label, div) in zip(axes[0], shown, strict=True):
        for (rank, device), g in system.group_by(["rank", "device"], maintain_order=True):
            vals = [None if v is None else v / div for v in g[column].to_list()]
            name = f"rank {rank}" + (f" gpu {device}" if device is not None and device >= 0 else "")
            ax.plot(g["t"].to_list(), vals, lw=0.8, label=name)
        ax.set_title(label)
        ax.set_xlabel("seconds")
        ax.set_ylim(bottom=0)
    if system.select(["rank", "device"]).unique().height <= 8:
        axes[0][0].legend(frameon=False, fontsize=5)
    return fig


def _svg(fig: Figure) -> str:
    try:
        svg = to_svg(fig)
    finally:
        plt.close(fig)
    return svg[svg.index("<svg") :]  # inline in the page: no XML declaration or doctype


def page(data: _Read) -> RunPage:
    """The run page's model and figures (call with the server's drawing lock held: pyplot is not thread-safe)."""
    out = RunPage(data.record, data.quarantined, data.quarantine.to_dicts(), len(data.record.events_per_rank))
    steps = data.steps
    if not steps.is_empty():
        out.steps = int(steps["steps"].sum())
        out.stall_steps = int(steps["stalls"].sum())
        out.warmup_steps = int(steps["warmup"].sum())
        out.drawn_ranks = _ranks_drawn(steps)
    with plt.rc_context(STYLE):
        if out.drawn_ranks:
            per = _per_event(steps)
            out.figures.append(
                {
                    "name": "steps",
                    "svg": _svg(_steps_figure(steps, out.drawn_ranks, per)),
                    "caption": (
                        "Step time along the run per rank: data, compute, communication, optimizer (mean per bucket of "
                        "steps), the mean step as a line; warm-up shaded; stalls (steps above the rank's Q3 + 1.5 IQR after "
                        "warm-up, as HS210 counts them) marked ▼ at the bucket's slowest step. Scroll to zoom, drag to pan."
                        + (
                            f" The log gives one step event per logging interval of up to {per} steps: each is drawn as "
                            "one, its time the interval's (the first of each launch holds its start-up: warm-up)."
                            if per > 1
                            else ""
                        )
                    ),
                }
            )
        if not data.evals.is_empty():
            t0 = data.started_s or float(data.evals["time"].min())  # type: ignore[arg-type]
            out.figures.append(
                {
                    "name": "evals",
                    "svg": _svg(_evals_figure(data.evals, t0)),
                    "caption": "Evaluations over time (the lowest rank's).",
                }
            )
        system = _system_figure(data.system) if not data.system.is_empty() else None
        if system is not None:
            out.figures.append(
                {
                    "name": "system",
                    "svg": _svg(system),
                    "caption": (
                        "System samples along the run (mean per time bucket), per rank and accelerator."
                    ),
                }
            )
    return out


__all__ = ["RunPage", "campaign_of", "page", "read"]
