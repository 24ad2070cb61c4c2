"""How numbers, intervals, names and paths read on a report's pages: the templates' filters and their environment."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from honestscale.analysis.points import do_not_quote, sig, verdicts_text
from honestscale.analysis.stats import Estimate
from honestscale.display import pieces, shown, shown_path, shown_text


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.2f} s"


def _in(seconds: float | None, unit: tuple[str, float] | list[Any]) -> str:
    """A time in the comparison's unit, without the unit (the column header has it)."""
    if seconds is None:
        return "–"
    v = seconds / float(unit[1])
    return f"{v:,.{1 if v >= 100 else 2 if v >= 1 else 3}f}"


Interval = tuple[float | None, float | None] | list[float | None]


def _interval(ci: Interval, fmt: Callable[[float], str]) -> str:
    """``lo–hi`` in the given format, or "n too small" where the runs give no interval."""
    lo, hi = ci
    return "n too small" if lo is None or hi is None else f"{fmt(lo)}–{fmt(hi)}"


def _ci_in(ci: Interval, unit: tuple[str, float] | list[Any]) -> str:
    return _interval(ci, lambda v: _in(v, unit))


def _hours(seconds: float | None) -> str:
    return "" if seconds is None or seconds < 3600 else f" ({seconds / 3600:.2f} h)"


def _ci_minutes(ci: tuple[float | None, float | None] | list[float | None]) -> str:
    lo, hi = ci
    if lo is None or hi is None:
        return "n too small"
    return f"{_minutes(lo)} – {_minutes(hi)}"


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f} %"


def ratio_text(
    value: float | None,
    ci: tuple[float | None, float | None] | list[float | None],
    pct: bool = False,
    suffix: str = "",
    say_none: bool = False,
) -> str:
    """A speedup (``2.01x``) or an efficiency (``50 %``) with its interval in brackets, rounded as printed; with
    ``say_none``, "(no interval)" where it has none (fewer than 6 runs at the point or its base)."""
    if value is None:
        return "–"

    def one(v: float) -> str:
        return f"{100 * v:.0f} %" if pct else f"{v:.2f}"

    lo, hi = ci
    if lo is not None and hi is not None:
        return f"{one(value)}{suffix} [{one(lo)}, {one(hi)}]"
    return one(value) + suffix + (" (no interval)" if say_none else "")


def _scaled(value: float | None, factor: float, digits: int = 1) -> str:
    """A number in another unit (J -> kJ: factor 1e-3), with thousands separators; "–" for none."""
    return _num(None if value is None else value * factor, digits)


def _scaled_ci(ci: Interval, factor: float, digits: int = 1) -> str:
    return _interval(ci, lambda v: _scaled(v, factor, digits))


def _estimate(e: Estimate | None) -> str:
    """A factor with its 95 % interval: ``1.80x [1.62, 1.95]``."""
    return "–" if e is None else ratio_text(e.value, (e.low, e.high), False, "x")


def _date(epoch: float | None) -> str:
    """A moment as its UTC day: ``2026-11-24``."""
    if epoch is None:
        return "–"
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d")


def _finalize(value: Any) -> Any:
    """Every text a template prints, as it is: bidirectional controls and other invisible characters as visible
    escapes (``display.shown_text``). Markup (a figure, a name already marked up, ``|e``) is left as it is: a form's
    value that must stay the name itself is written ``{{ v | e }}``."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return shown_text(value)
    return value


def _verdicts(lint: dict[str, list[str]] | None, mark: bool = True) -> Markup:
    """A number's verdicts as a mark, ``✗ 2 · ? 6`` (rules failing, unverifiable), the rules' codes one hover away
    (``title``; each series lists them once in full: ``verdicts_list``), and "do not quote" in words where an
    error-severity rule fails (unless ``mark`` is false: the caller marks it)."""
    if not lint or not any(lint.get(k) for k in ("fail", "cannot_verify", "suppressed")):
        return Markup("none")
    counts = [f"{sign} {len(lint[k])}" for k, sign in (("fail", "✗"), ("cannot_verify", "?")) if lint.get(k)]
    if lint.get("suppressed"):
        counts.append(f"{len(lint['suppressed'])} suppressed")
    flag = do_not_quote(lint) if mark else None
    shown = Markup('<span class="verdicts" title="{}">{}</span>').format(
        verdicts_text(lint, mark=False), " · ".join(counts)
    )
    return shown + (Markup(' <strong class="flag">— {}</strong>').format(flag) if flag else "")


def _name(value: Any, limit: int = 0) -> Markup:
    """A name (campaign, run, framework, system) isolated from the text around it (``<bdi>``), its controls as
    marked escapes, the whole name on hover (``title``); on screen the stylesheet cuts a long one short, in print
    ``limit`` does (0: never; ``…`` and how many characters were left out)."""
    whole = shown(value)
    inner, left = [], len(whole) - limit if limit else 0
    budget = limit if left > 0 else len(whole)
    for piece, marked in pieces(value):
        if budget <= 0:
            break
        piece = piece if marked else piece[:budget]  # an escape is never cut in half
        budget -= len(piece)
        inner.append(f'<span class="ctl">{escape(piece)}</span>' if marked else str(escape(piece)))
    if left > 0:
        inner.append(f'<span class="cut">… ({left:,} more characters)</span>')
    return Markup(f'<bdi class="name" title="{escape(whole)}">{"".join(inner)}</bdi>')


def _path(value: Any, root: Any = None) -> str:
    """A path as published pages show it (``display.shown_path``: relative to ``root``, never the home folder)."""
    return shown_path(value, root)


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("honestscale.report", "templates"),
        autoescape=select_autoescape(["html", "j2"], default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    env.filters.update(minutes=_minutes, hours=_hours, ci_minutes=_ci_minutes, num=_num, sig=sig, pct=_pct, within=_in,
                       ci_within=_ci_in, ratio=ratio_text, verdicts=_verdicts, verdicts_list=verdicts_text, scaled=_scaled,
                       scaled_ci=_scaled_ci, estimate=_estimate, date=_date, name=_name, path=_path)  # fmt: skip
    env.tests["exported_table"] = lambda name: str(name).endswith((".csv", ".tex"))  # a table for a paper
    return env
