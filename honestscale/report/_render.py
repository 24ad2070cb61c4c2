"""Model -> Jinja2 templates (autoescaped) + figures -> HTML -> PDF (WeasyPrint), and the paper exports.

Everything the PDF uses lives in one assets folder next to it; WeasyPrint fetches through
:class:`AssetFetcher`, which serves files from that folder only and refuses every other URL (no
network, no ``file://`` elsewhere), so a hostile run name or note cannot make the report fetch
anything.
"""

from __future__ import annotations

import contextlib
import datetime
import mimetypes
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from honestscale.analysis.points import sig, verdicts_text
from honestscale.analysis.stats import Estimate
from honestscale.display import pieces, shown, shown_path, shown_text
from honestscale.files import check_output_file, check_output_folder, swap_in
from honestscale.report import _figures, _layouts
from honestscale.report._copies import PaperCopies
from honestscale.report._model import ComparisonModel, Model, Point
from honestscale.report._units import unit_for
from honestscale.spreadsheet import to_csv


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
                       ci_within=_ci_in, ratio=ratio_text, verdicts=verdicts_text, scaled=_scaled,
                       scaled_ci=_scaled_ci, estimate=_estimate, date=_date, name=_name, path=_path)  # fmt: skip
    return env


@dataclass
class ScalingView:
    """A scaling comparison as the templates see it."""

    c: ComparisonModel
    anchor: str
    figures: list[dict[str, Any]]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.c, name)

    @property
    def unit(self) -> tuple[str, float]:
        return unit_for([t for p in self.c.points for t in (p.time_s, p.tta_s, p.mlperf_score_s, *p.time_ci)])

    @property
    def has_tta(self) -> bool:
        return any(p.tta_s is not None for p in self.c.points)

    @property
    def has_mlperf(self) -> bool:
        return any(p.mlperf_score_s is not None for p in self.c.points)

    @property
    def has_official(self) -> bool:
        """Whether a point has an official MLPerf score (a scaling.json factor) beside its olympic mean."""
        return any(p.mlperf_official_s is not None for p in self.c.points)


class AssetFetcher:
    """WeasyPrint URL fetcher serving only files inside ``root``; every other URL is refused."""

    _fail_on_errors = False  # WeasyPrint reads this: a refused URL is skipped with a warning, not fatal

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.refused: list[str] = []

    def fetch(self, url: str, headers: dict[str, str] | None = None) -> Any:
        from weasyprint.urls import URLFetcherResponse

        parsed = urlparse(url)
        path = Path(unquote(parsed.path)).resolve() if parsed.scheme == "file" and not parsed.netloc else None
        if path is None or not path.is_relative_to(self.root) or not path.is_file():
            self.refused.append(url)
            raise ValueError(f"the report fetches only its own assets; refused {url[:200]}")
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return URLFetcherResponse(url, body=path.read_bytes(), headers={"Content-Type": mime})

    def __call__(self, url: str) -> Any:  # older WeasyPrint calls the fetcher as a function
        return self.fetch(url)


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "✗": "fails", "✓": "ok", "–": "--",
          "—": "---", "×": r"$\times$", "≤": r"$\leq$", "≥": r"$\geq$", "±": r"$\pm$", "µ": r"$\mu$",
          "\u00a0": "~", "…": r"\ldots{}"}  # fmt: skip


def _latex_escape(text: str) -> str:
    """Text as pdflatex with booktabs alone typesets it: specials escaped, symbols spelt, other non-ASCII as '?'."""
    return "".join(_LATEX.get(ch, ch if ch.isascii() else "?") for ch in text)


def latex_table(header: list[str], rows: list[list[str]], caption: str) -> str:
    cols = "l" + "r" * (len(header) - 1)
    lines = [r"\begin{table}[t]", r"\centering", rf"\caption{{{_latex_escape(caption)}}}", rf"\begin{{tabular}}{{{cols}}}",
             r"\toprule", " & ".join(_latex_escape(h) for h in header) + r" \\", r"\midrule"]  # fmt: skip
    lines += [" & ".join(_latex_escape(c) for c in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


def _f(v: float | None, d: int = 2) -> str:
    return "" if v is None else f"{v:.{d}f}"


def _codes(p: Point) -> str:
    return verdicts_text(p.lint)


def results_tables(c: ComparisonModel) -> list[tuple[str, list[str], list[list[str]]]]:
    """The series' tables for a paper, at most 6 columns each: times, then scaling (as the PDF prints them)."""
    unit, div = unit_for([t for p in c.points for t in (p.time_s, p.tta_s, p.mlperf_score_s, *p.time_ci)])

    def t(v: float | None) -> str:
        return _in(v, (unit, div)) if v is not None else ""

    extra: list[tuple[str, Callable[[Point], str]]] = []  # (header, cell) after the time to train
    if any(p.tta_s is not None for p in c.points):
        extra.append((f"time to accuracy [{unit}]", lambda p: t(p.tta_s)))
    if any(p.mlperf_official_s is not None for p in c.points):
        # six columns fit a paper's column: the official score beside the olympic mean it scales, in one cell
        extra.append((f"MLPerf olympic mean (official score) [{unit}]",
                      lambda p: f"{t(p.mlperf_score_s)} ({t(p.mlperf_official_s)})"))  # fmt: skip
    elif any(p.mlperf_score_s is not None for p in c.points):
        extra.append((f"MLPerf olympic mean [{unit}]", lambda p: t(p.mlperf_score_s)))
    extra = extra or [("global batch", lambda p: " ".join(map(str, p.global_batch)))]
    # the interval in the time's cell: six columns fit a paper's column with time to accuracy and the MLPerf score
    times = [
        ["workers", "runs ok", f"time to train (95 % CI) [{unit}]", *(h for h, _ in extra), "rules failing"]
    ]
    for p in c.points:
        ci = _ci_in(p.time_ci, (unit, div)).replace("n too small", "").strip()
        times.append([str(p.workers), f"{p.succeeded}/{p.runs}", f"{t(p.time_s)} ({ci})" if ci else t(p.time_s),
                      *(cell(p) for _, cell in extra), _codes(p)])  # fmt: skip
    scaling = [["workers", "speedup [95 % CI]", "efficiency [95 % CI]", "throughput speedup [95 % CI]",
                "throughput efficiency [95 % CI]", "rules failing (with the base)"]]  # fmt: skip
    rates = [["workers", "samples/s", "per worker", "steady-state samples/s", "stall share", "accuracy"]]
    for p in c.points:
        scaling.append([str(p.workers), ratio_text(p.speedup, p.speedup_ci), ratio_text(p.efficiency, p.efficiency_ci, pct=True),
                        ratio_text(p.throughput_speedup, p.throughput_speedup_ci),
                        ratio_text(p.throughput_efficiency, p.throughput_efficiency_ci, pct=True), verdicts_text(p.ratio_lint)])  # fmt: skip
        rates.append([str(p.workers), _f(p.throughput, 0), _f(p.per_worker, 0), _f(p.steady_throughput, 0),
                      _pct(p.stall_share) if p.stall_share is not None else "", f"{_f(p.accuracy, 4)} {p.accuracy_split or ''}".strip()])  # fmt: skip
    return [
        ("times", times[0], times[1:]),
        ("scaling", scaling[0], scaling[1:]),
        ("throughput", rates[0], rates[1:]),
    ]


def _codes_of(lint: dict[str, list[str]] | None) -> tuple[str, str]:
    """The failing and the unverifiable rules, as plain codes (CSV)."""
    return " ".join((lint or {}).get("fail", [])), " ".join((lint or {}).get("cannot_verify", []))


def _value(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def _with_ci(name: str, v: float | None, ci: tuple[float | None, float | None]) -> dict[str, str]:
    return {name: _value(v), f"{name}_ci_low": _value(ci[0]), f"{name}_ci_high": _value(ci[1])}


def _columns(rows: list[dict[str, str]]) -> tuple[list[str], list[list[str]]]:
    header = list(rows[0]) if rows else []
    return header, [[r[k] for k in header] for r in rows]


def results_values(c: ComparisonModel) -> list[tuple[str, list[str], list[list[str]]]]:
    """The series' tables as values for a spreadsheet or a plotting script: numbers in seconds (or plain ratios and
    fractions), each interval end in its own column, the split and the rules in their own columns."""
    times, scaling, rates = [], [], []
    for p in c.points:
        fail, unknown = _codes_of(p.lint)
        times.append({"workers": str(p.workers), "runs_ok": str(p.succeeded), "runs": str(p.runs),
                      "global_batch": " ".join(map(str, p.global_batch)),
                      **_with_ci("time_to_train_s", p.time_s, p.time_ci), "time_to_accuracy_s": _value(p.tta_s),
                      "mlperf_olympic_mean_s": _value(p.mlperf_score_s),
                      "mlperf_scaling_factor": _value(p.mlperf_scaling_factor),
                      "mlperf_official_score_s": _value(p.mlperf_official_s),
                      "rules_failing": fail, "rules_unverifiable": unknown})  # fmt: skip
        fail, unknown = _codes_of(p.ratio_lint)
        scaling.append({"workers": str(p.workers), **_with_ci("speedup", p.speedup, p.speedup_ci),
                        **_with_ci("efficiency", p.efficiency, p.efficiency_ci),
                        **_with_ci("throughput_speedup", p.throughput_speedup, p.throughput_speedup_ci),
                        **_with_ci("throughput_efficiency", p.throughput_efficiency, p.throughput_efficiency_ci),
                        "rules_failing": fail, "rules_unverifiable": unknown})  # fmt: skip
        rates.append({"workers": str(p.workers), "samples_per_s": _value(p.throughput),
                      "samples_per_s_per_worker": _value(p.per_worker),
                      "steady_samples_per_s": _value(p.steady_throughput), "stall_share": _value(p.stall_share),
                      "accuracy": _value(p.accuracy), "accuracy_split": p.accuracy_split or ""})  # fmt: skip
    return [("times", *_columns(times)), ("scaling", *_columns(scaling)), ("throughput", *_columns(rates))]


def framework_values(c: ComparisonModel) -> list[tuple[str, list[str], list[list[str]]]]:
    """A framework comparison as values (see :func:`results_values`)."""
    times, parts = [], []
    for fw in c.frameworks:
        p = fw.point
        fail, unknown = _codes_of(p.lint)
        times.append({"framework": fw.framework, "versions": " ".join(fw.versions), "runs_ok": str(p.succeeded),
                      "runs": str(p.runs), **_with_ci("time_to_train_s", p.time_s, p.time_ci),
                      "relative_time": _value(fw.relative_time), "rules_failing": fail,
                      "rules_unverifiable": unknown})  # fmt: skip
        shares = {f"{k}_share": _value(p.breakdown.get(k)) for k in ("data", "compute", "comm", "optimizer")}
        parts.append({"framework": fw.framework, "samples_per_s": _value(p.throughput), **shares,
                      "comm_measured": str(p.comm == "measured").lower()})  # fmt: skip
    return [("times", *_columns(times)), ("breakdown", *_columns(parts))]


def framework_tables(c: ComparisonModel) -> list[tuple[str, list[str], list[list[str]]]]:
    """A framework comparison for a paper: times, then the step breakdown (at most 6 columns each)."""
    unit, div = unit_for([t for f in c.frameworks for t in (f.point.time_s, *f.point.time_ci)])
    times = [
        [
            "framework",
            "runs ok",
            f"time to train [{unit}]",
            f"95 % CI [{unit}]",
            "relative time",
            "rules failing",
        ]
    ]
    parts = [["framework", "samples/s", "data", "compute", "comm", "optimizer"]]
    for fw in c.frameworks:
        p = fw.point
        times.append([f"{fw.framework} {' '.join(fw.versions)}".strip(), f"{p.succeeded}/{p.runs}", _in(p.time_s, (unit, div)),
                      _ci_in(p.time_ci, (unit, div)).replace("n too small", ""), _f(fw.relative_time), _codes(p)])  # fmt: skip
        shares = [_pct(p.breakdown.get(k)) for k in ("data", "compute", "comm", "optimizer")]
        if p.comm != "measured":
            shares[2] = p.comm
        parts.append([fw.framework, _f(p.throughput, 0), *shares])
    return [("times", times[0], times[1:]), ("breakdown", parts[0], parts[1:])]


def _slug(text: str) -> str:
    """A file name from a label: the whole label, lower case, punctuation as dashes (never cut short)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:200] or "comparison"


@dataclass
class Outputs:
    html: Path
    pdf: Path | None
    assets: Path
    exports: list[Path]
    refused: list[str]
    scaling: list[ScalingView]  # the comparisons as the section templates see them, with their figures
    frameworks: list[ScalingView]
    layouts: list[ScalingView] = field(default_factory=list)


def check_targets(pdf: Path | None, html: Path | None, assets: Path) -> None:
    """Refuse, before anything is written, a PDF or HTML path that is not a regular file or a new path, and an
    assets folder that is not a folder (a device, a FIFO or a link is never replaced)."""
    for path, option in ((pdf, "--output"), (html, "--html")):
        if path is not None:
            check_output_file(path, option)
    check_output_folder(assets, "--output")


def render(model: Model, pdf: Path | None, html: Path | None, assets: Path) -> Outputs:
    """Write figures, tables (CSV, LaTeX), the HTML and (when asked) the PDF.

    Everything is written aside (a hidden staging folder, ``.<name>.partial`` files) and swapped in at the end in one
    step: Ctrl-C, a kill or a full disk leaves the previous report and its files whole, and files of an older
    report do not linger in ``assets``.
    """
    with staged(pdf, html, assets) as (staging, partials):
        exports, refused, scaling, frameworks, layouts = _write(model, pdf, html, staging, assets, partials)
    return Outputs(
        html or assets / "report.html", pdf, assets, exports, refused, scaling, frameworks, layouts
    )


@contextlib.contextmanager
def staged(
    pdf: Path | None, html: Path | None, assets: Path
) -> Iterator[tuple[Path, list[tuple[Path, Path]]]]:
    """A staging folder beside ``assets`` and the list of (partial file, its target) to fill; on success everything is
    swapped in at once, on any failure nothing is (the previous report stays whole)."""
    check_targets(pdf, html, assets)
    staging = assets.with_name(f".{assets.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    partials: list[tuple[Path, Path]] = []
    try:
        yield staging, partials
        swap_in(staging, assets, partials)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        for partial, _ in partials:
            partial.unlink(missing_ok=True)


def html_beside(text: str, html: Path, assets: Path, partials: list[tuple[Path, Path]], figures: str) -> None:
    """The HTML written for ``html`` (as a partial), its stylesheet and figures (``src="<figures>...``) in ``assets``."""
    rel = Path(os.path.relpath(assets, html.resolve().parent)).as_posix()
    partial = html.with_name(f".{html.name}.partial")
    partials.append((partial, html))
    partial.write_text(text.replace('href="report.css"', f'href="{rel}/report.css"')
                       .replace(f'src="{figures}', f'src="{rel}/{figures}'), encoding="utf-8")  # fmt: skip


def publish(template: str, context: dict[str, Any], page: str, *, staging: Path, pdf: Path | None,
            html: Path | None, assets: Path, partials: list[tuple[Path, Path]], figures: str) -> list[str]:  # fmt: skip
    """The page rendered from ``template`` into ``staging`` with the stylesheet, the HTML beside its target and
    the PDF printed from it (as partials, swapped in by ``staged``); returns the URLs the fetcher refused."""
    env = environment()
    (staging / "report.css").write_text(env.loader.get_source(env, "report.css")[0], encoding="utf-8")  # type: ignore[union-attr]
    text = env.get_template(template).render(**context)
    (staging / page).write_text(text, encoding="utf-8")
    if html is not None:
        html_beside(text, html, assets, partials, figures)
    if pdf is None:
        return []
    from weasyprint import HTML

    fetcher = AssetFetcher(staging)
    partial = pdf.with_name(f".{pdf.name}.partial")
    partials.append((partial, pdf))
    # full_fonts: embed the fonts whole; subsetting them in Python costs more than the bytes it saves
    HTML(filename=str(staging / page), url_fetcher=fetcher).write_pdf(str(partial), full_fonts=True)
    return fetcher.refused


def _write(model: Model, pdf: Path | None, html: Path | None, staging: Path, assets: Path,
           partials: list[tuple[Path, Path]]
           ) -> tuple[list[Path], list[str], list[ScalingView], list[ScalingView], list[ScalingView]]:  # fmt: skip
    """Every file of the report into ``staging`` (named as they will be in ``assets``), the PDF beside its target;
    the figures' PDF files saved aside (``PaperCopies``) while the rest is drawn and laid out."""
    copies = PaperCopies()
    try:
        written = _write_files(model, pdf, html, staging, assets, partials, copies)
    except BaseException:
        copies.abandon()
        raise
    copies.wait()
    return written


def _write_files(model: Model, pdf: Path | None, html: Path | None, staging: Path, assets: Path,
                 partials: list[tuple[Path, Path]], copies: PaperCopies
                 ) -> tuple[list[Path], list[str], list[ScalingView], list[ScalingView], list[ScalingView]]:  # fmt: skip
    exports: list[Path] = []
    scaling: list[ScalingView] = []
    frameworks: list[ScalingView] = []
    figure_numbers = iter(range(1, 10_000))
    kinds = (
        ("scaling", _figures.render, results_tables, results_values, "table", "cmp", "{label}: {mode} scaling, {part}",
         scaling),
        ("framework", _figures.render_frameworks, framework_tables, framework_values, "frameworks", "fw",
         "{label}: frameworks, {part}", frameworks),
    )  # fmt: skip
    for kind, draw, tables, values, prefix, anchor, caption, views in kinds:
        for i, c in enumerate([c for c in model.comparisons if c.kind == kind], start=1):
            figs = []
            for r in draw(c, i, staging, copies):
                figs.append({"name": r.name, "caption": r.caption, "number": next(figure_numbers)})
                exports += [assets / f"{r.name}.pdf", assets / f"{r.name}.svg"]
            csvs = {part: (header, rows) for part, header, rows in values(c)}
            for part, header, rows in tables(c):
                stem = f"{prefix}{i}-{part}-{_slug(c.label)}"
                (staging / f"{stem}.csv").write_text(to_csv(*csvs[part]), encoding="utf-8")
                title = caption.format(label=c.label, mode=c.mode, part=part)
                (staging / f"{stem}.tex").write_text(latex_table(header, rows, title), encoding="utf-8")
                exports += [assets / f"{stem}.csv", assets / f"{stem}.tex"]
            views.append(ScalingView(c, f"{anchor}-{i}", figs))
    layouts = []
    for i, c in enumerate([c for c in model.comparisons if c.kind == "layout" and c.layouts], start=1):
        assert c.layouts is not None
        stem = f"layouts{i}-{_slug(c.label)}"
        ((_, header, rows),) = _layouts.values(c.layouts)
        (staging / f"{stem}.csv").write_text(to_csv(header, rows), encoding="utf-8")
        exports.append(assets / f"{stem}.csv")
        for part, header, rows in _layouts.tables(c.layouts):
            title = f"{c.label}: layouts, {part}"
            (staging / f"{stem}-{part}.tex").write_text(latex_table(header, rows, title), encoding="utf-8")
            exports.append(assets / f"{stem}-{part}.tex")
        layouts.append(ScalingView(c, f"lay-{i}", []))
    run_header = ["run", "purpose", "status", "workers", "global batch", "time [s]", "accelerator-hours", "final quality",
                  "split", "config hash", "energy to train [J]", "node-hours (CPU only)", "core-hours (CPU only)"]  # fmt: skip
    run_rows = [[r.run_id, r.purpose or "", r.status or "", str(r.workers or ""), str(r.global_batch or ""),
                 "" if r.time_s is None else f"{r.time_s:.1f}",
                 "" if r.accelerator_hours is None else f"{r.accelerator_hours:.3f}",
                 "" if r.accuracy is None else f"{r.accuracy:.4f}", r.split or "", r.config_hash or "",
                 "" if r.energy_j is None else f"{r.energy_j:.1f}",
                 "" if r.node_hours is None else f"{r.node_hours:.6g}", "" if r.core_hours is None else f"{r.core_hours:.6g}"]
                for r in model.runs]  # fmt: skip
    (staging / "runs.csv").write_text(to_csv(run_header, run_rows), encoding="utf-8")
    keep = (0, 1, 2, 3, 5, 7)  # six columns fit one column of a paper; the CSV has them all
    (staging / "runs.tex").write_text(latex_table([run_header[k] for k in keep], [[row[k] for k in keep] for row in run_rows],
                                                  "All runs"), encoding="utf-8")  # fmt: skip
    exports += [assets / "runs.csv", assets / "runs.tex"]
    refused = publish("report.html.j2", {"model": model, "scaling": scaling, "frameworks": frameworks,
                                         "layouts": layouts},
                      "report.html", staging=staging, pdf=pdf, html=html, assets=assets, partials=partials,
                      figures="fig")  # fmt: skip
    return exports, refused, scaling, frameworks, layouts
