"""Model -> Jinja2 templates (autoescaped) + figures -> HTML -> PDF (WeasyPrint), and the paper exports.

Everything the PDF uses lives in one assets folder next to it; WeasyPrint fetches through
:class:`AssetFetcher`, which serves files from that folder only and refuses every other URL (no
network, no ``file://`` elsewhere), so a hostile run name or note cannot make the report fetch
anything.
"""

from __future__ import annotations

import csv
import io
import mimetypes
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from honestscale.report import _figures
from honestscale.report._model import ComparisonModel, Model


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.2f} s"


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


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("honestscale.report", "templates"),
        autoescape=select_autoescape(["html", "j2"], default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(minutes=_minutes, hours=_hours, ci_minutes=_ci_minutes, num=_num, pct=_pct)
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
    def has_tta(self) -> bool:
        return any(p.tta_s is not None for p in self.c.points)

    @property
    def has_mlperf(self) -> bool:
        return any(p.mlperf_score_s is not None for p in self.c.points)


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


def _latex_escape(text: str) -> str:
    table = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
             "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}  # fmt: skip
    return "".join(table.get(ch, ch) for ch in text)


def latex_table(header: list[str], rows: list[list[str]], caption: str) -> str:
    cols = "l" + "r" * (len(header) - 1)
    lines = [r"\begin{table}[t]", r"\centering", rf"\caption{{{_latex_escape(caption)}}}", rf"\begin{{tabular}}{{{cols}}}",
             r"\toprule", " & ".join(_latex_escape(h) for h in header) + r" \\", r"\midrule"]  # fmt: skip
    lines += [" & ".join(_latex_escape(c) for c in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


def _csv(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def _results_rows(c: ComparisonModel) -> tuple[list[str], list[list[str]]]:
    header = ["workers", "runs ok", "global batch", "time to train [s]", "CI low [s]", "CI high [s]",
              "time to accuracy [s]", "MLPerf score [s]", "speedup", "efficiency", "samples/s", "per worker",
              "accuracy"]  # fmt: skip

    def f(v: float | None, d: int = 3) -> str:
        return "" if v is None else f"{v:.{d}f}"

    rows = [
        [str(p.workers), f"{p.succeeded}/{p.runs}", " ".join(map(str, p.global_batch)), f(p.time_s, 1),
         f(p.time_ci[0], 1), f(p.time_ci[1], 1), f(p.tta_s, 1), f(p.mlperf_score_s, 1), f(p.speedup), f(p.efficiency),
         f(p.throughput, 1), f(p.per_worker, 1), f(p.accuracy, 4)]
        for p in c.points
    ]  # fmt: skip
    return header, rows


def _framework_rows(c: ComparisonModel) -> tuple[list[str], list[list[str]]]:
    header = ["framework", "version", "runs ok", "time to train [s]", "CI low [s]", "CI high [s]",
              "time to accuracy [s]", "relative time", "samples/s", "per worker", "data", "compute", "comm",
              "optimizer", "accuracy"]  # fmt: skip

    def f(v: float | None, d: int = 3) -> str:
        return "" if v is None else f"{v:.{d}f}"

    rows = []
    for fw in c.frameworks:
        p = fw.point
        parts = [f(p.breakdown.get(k)) for k in ("data", "compute", "comm", "optimizer")]
        if not fw.comm_measured:
            parts[2] = "not exposed"
        rows.append([fw.framework, " ".join(fw.versions), f"{p.succeeded}/{p.runs}", f(p.time_s, 2),
                     f(p.time_ci[0], 2), f(p.time_ci[1], 2), f(p.tta_s, 2), f(fw.relative_time, 2),
                     f(p.throughput, 1), f(p.per_worker, 1), *parts, f(p.accuracy, 4)])  # fmt: skip
    return header, rows


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "comparison"


@dataclass
class Outputs:
    html: Path
    pdf: Path | None
    assets: Path
    exports: list[Path]
    refused: list[str]


def render(model: Model, pdf: Path | None, html: Path | None, assets: Path) -> Outputs:
    """Write figures, tables (CSV, LaTeX), the HTML and (when asked) the PDF."""
    assets.mkdir(parents=True, exist_ok=True)
    exports: list[Path] = []
    scaling: list[ScalingView] = []
    frameworks: list[ScalingView] = []
    figure_numbers = iter(range(1, 10_000))
    kinds = (
        ("scaling", _figures.render, _results_rows, "table", "cmp", "{label}: {mode} scaling", scaling),
        ("framework", _figures.render_frameworks, _framework_rows, "frameworks", "fw", "{label}: frameworks",
         frameworks),
    )  # fmt: skip
    for kind, draw, table, prefix, anchor, caption, views in kinds:
        for i, c in enumerate([c for c in model.comparisons if c.kind == kind], start=1):
            figs = []
            for r in draw(c, i, assets):
                figs.append({"name": r.name, "caption": r.caption, "number": next(figure_numbers)})
                exports += [assets / f"{r.name}.pdf", assets / f"{r.name}.svg"]
            header, rows = table(c)
            stem = f"{prefix}{i}-{_slug(c.label)}"
            (assets / f"{stem}.csv").write_text(_csv(header, rows), encoding="utf-8")
            title = caption.format(label=c.label, mode=c.mode)
            (assets / f"{stem}.tex").write_text(latex_table(header, rows, title), encoding="utf-8")
            exports += [assets / f"{stem}.csv", assets / f"{stem}.tex"]
            views.append(ScalingView(c, f"{anchor}-{i}", figs))
    run_header = ["run", "purpose", "status", "workers", "global batch", "time [s]", "accelerator-hours", "accuracy",
                  "split", "config hash"]  # fmt: skip
    run_rows = [[r.run_id, r.purpose or "", r.status, str(r.workers or ""), str(r.global_batch or ""),
                 "" if r.time_s is None else f"{r.time_s:.1f}",
                 "" if r.accelerator_hours is None else f"{r.accelerator_hours:.3f}",
                 "" if r.accuracy is None else f"{r.accuracy:.4f}", r.split or "", r.config_hash or ""]
                for r in model.runs]  # fmt: skip
    (assets / "runs.csv").write_text(_csv(run_header, run_rows), encoding="utf-8")
    (assets / "runs.tex").write_text(latex_table(run_header, run_rows, "All runs"), encoding="utf-8")
    exports += [assets / "runs.csv", assets / "runs.tex"]
    env = environment()
    (assets / "report.css").write_text(env.loader.get_source(env, "report.css")[0], encoding="utf-8")  # type: ignore[union-attr]
    text = env.get_template("report.html.j2").render(model=model, scaling=scaling, frameworks=frameworks)
    page = assets / "report.html"
    page.write_text(text, encoding="utf-8")
    refused: list[str] = []
    if html is not None:
        rel = Path(os.path.relpath(assets, html.resolve().parent)).as_posix()
        html.write_text(text.replace('href="report.css"', f'href="{rel}/report.css"')
                        .replace('src="fig', f'src="{rel}/fig'), encoding="utf-8")  # fmt: skip
    if pdf is not None:
        from weasyprint import HTML

        fetcher = AssetFetcher(assets)
        # full_fonts: embed the fonts whole; subsetting them in Python costs more than the bytes it saves
        HTML(filename=str(page), url_fetcher=fetcher).write_pdf(str(pdf), full_fonts=True)
        refused = fetcher.refused
    return Outputs(html or page, pdf, assets, exports, refused)
