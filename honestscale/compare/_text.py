"""What ``honestscale compare`` prints in a terminal: per pair the factor, the confounds, a table of measures (each
side's statistic named, with its interval; B over A with its interval; the test) and the rules' verdicts."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from honestscale.analysis.points import sig
from honestscale.analysis.stats import DECISION_RULE, MIN_INTERVAL_RUNS
from honestscale.compare._gate import CANNOT_JUDGE, FAIL, PASS, Check
from honestscale.compare._history import Series
from honestscale.compare._measures import Measure, Side
from honestscale.compare._result import Result
from honestscale.display import shown_text


def _t(text: str, style: str = "") -> Text:
    """Text as the terminal shows it: names' bidirectional controls and other control characters escaped
    (``honestscale.display.shown_text``), never reordering what is printed beside them."""
    return Text(shown_text(text), style=style)


def _side(s: Side, unit: str) -> str:
    if s.centre is None:
        return f"none ({s.ok}/{s.runs} runs ok)"
    lo, hi = s.ci
    ci = (
        f" [{sig(lo)}, {sig(hi)}]"
        if lo is not None and hi is not None
        else f" (no interval: fewer than {MIN_INTERVAL_RUNS} runs)"
    )
    return f"{sig(s.centre)} {unit}{ci}, n = {len(s.values)}"


def _ratio(m: Measure) -> str:
    r = m.ratio
    if r is None:
        return "–"
    return sig(r.value, 3) + (
        f" [{sig(r.low, 3)}, {sig(r.high, 3)}]" if r.low is not None and r.high is not None else ""
    )


def _test(m: Measure) -> Text:
    d = m.difference
    if d is None:
        return _t("one value a side")
    p = "–" if d.p_value is None else f"{d.p_value:.3g}"
    if not d.testable:
        return _t(f"too few runs (n = {d.n_a}, {d.n_b}; p = {p})", style="yellow")
    style = "bold" if d.significant else "yellow" if d.disagree else ""
    return _t(f"{d.verdict} (p = {p})", style=style)


def measures_table(ms: Sequence[Measure]) -> Table:
    t = Table(show_edge=False, pad_edge=False)
    for h in (
        "measure",
        "statistic",
        "A [95 % CI]",
        "B [95 % CI]",
        "B / A [95 % CI]",
        "verdict (Mann-Whitney p)",
    ):
        t.add_column(h)
    for m in ms:
        t.add_row(m.name, m.statistic, _side(m.a, m.unit), _side(m.b, m.unit), _ratio(m), _test(m))
    return t


def result_text(r: Result, gate: Sequence[Check] = ()) -> Group:
    parts: list[RenderableType] = [
        _t(f"A: {r.a.text} ({len(r.a_runs)} runs)   B: {r.b.text} ({len(r.b_runs)} runs)", style="bold")
    ]
    for why, ids in r.left_out.items():
        parts.append(_t(f"left out: {len(ids)} run(s), {why}", style="dim"))
    for i, c in enumerate(r.pairs, start=1):
        p = c.pair
        parts.append(_t(f"\npair {i}: {p.label}", style="bold"))
        if p.state_of_the_art:
            parts.append(_t(f"  against the state of the art (MLPerf); what differs: "
                              f"{'; '.join(d.text() for d in p.differs) or 'nothing recorded'}"))  # fmt: skip
        else:
            factor = "; ".join(d.text() for d in p.factor) or (
                "none: nothing recorded differs (two samples of one setup)"
                if not p.confounds
                else "not named (see HS214)"
            )
            parts.append(_t(f"  factor: {factor}"))
            if p.consequences:
                parts.append(_t(f"  follows from the factor: {'; '.join(c.text() for c in p.consequences)}"))
            if p.confounds:
                parts.append(_t(f"  confounds: {'; '.join(d.text() for d in p.confounds)}", style="yellow"))
        if c.caveat:
            parts.append(_t(f"  ✗ {c.caveat}", style="bold red"))
        parts.append(measures_table(c.measures))
        for m in c.measures:
            parts.append(_t(f"  {m.sentence()}"))
        v = c.verdicts
        parts.append(_t(f"  rules about both sides: {len(v['fail'])} fail ({', '.join(v['fail']) or 'none'}), "
                          f"{len(v['cannot_verify'])} cannot verify ({', '.join(v['cannot_verify']) or 'none'})"))  # fmt: skip
        for f in c.findings:
            if f.target == c.comparison and not f.suppressed:
                parts.append(_t(f"  ✗ {f.code} {f.message}", style="red"))
    for u in r.unpaired:
        parts.append(_t(f"\nno partner on the other side: {u.side} {u.setup.label} ({len(u.setup.runs)} runs); "
                          f"closest: {u.closest or '-'}; differs: {'; '.join(u.differs)}", style="yellow"))  # fmt: skip
    if not r.pairs:
        parts.append(_t("\nno pair of like setups: nothing was compared", style="red"))
    else:
        parts.append(_t(f"\nhow a difference is decided: {DECISION_RULE}.", style="dim"))
    marks = {PASS: ("✓ pass", "green"), FAIL: ("✗ FAIL", "red"), CANNOT_JUDGE: ("? cannot judge", "yellow")}
    for g in gate:
        mark, style = marks[g.outcome]
        parts.append(_t(f"\ngate --fail-if-{g.direction} {g.threshold:.0%} on {g.measure}, {g.pair}: {mark}: "
                          f"{g.reason}", style=style))  # fmt: skip
    return Group(*parts)


def history_text(setup: str, series: Sequence[Series]) -> Group:
    parts: list[RenderableType] = []
    for s in series:
        parts.append(_t(f"{setup}: {s.setup} - {s.measure}, median of runs [95 % CI]", style="bold"))
        t = Table(show_edge=False, pad_edge=False)
        for h in (
            "campaign",
            "runs ok",
            "median [95 % CI]",
            "vs previous",
            "change point",
            "what changed",
            "rules",
        ):
            t.add_column(h)
        for p in s.points:
            lo, hi = p.ci
            ci = f" [{sig(lo)}, {sig(hi)}]" if lo is not None and hi is not None else ""
            vs = "–"
            if p.ratio is not None:
                r = p.ratio
                rci = f" [{sig(r.low, 3)}, {sig(r.high, 3)}]" if r.has_interval else ""
                vs = f"{sig(r.value, 3)}x{rci}" + (f": {p.difference.verdict}" if p.difference else "")
            rules = (
                f"fail: {', '.join(p.verdicts['fail']) or 'none'}; "
                f"cannot verify: {', '.join(p.verdicts['cannot_verify']) or 'none'}"
            )
            t.add_row(_t(p.campaign), f"{len(p.values)}/{len(p.runs)}", f"{sig(p.centre)} s{ci}", vs,
                      _t("yes", style="bold red") if p.change_point else "no",
                      "; ".join(c.text() for c in p.changed) or "–", rules)  # fmt: skip
        parts.append(t)
    return Group(*parts)
