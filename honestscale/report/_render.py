"""Model -> Jinja2 templates (autoescaped) + figures -> HTML -> PDF (WeasyPrint), and the paper exports.

Everything the PDF uses lives in one assets folder next to it; WeasyPrint fetches through
:class:`AssetFetcher`, which serves files from that folder only and refuses every other URL (no
network, no ``file://`` elsewhere), so a hostile run name or note cannot make the report fetch
anything.
"""

from __future__ import annotations

import contextlib
import mimetypes
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from honestscale.files import check_output_file, check_output_folder, swap_in
from honestscale.report import _figures
from honestscale.report._copies import PaperCopies
from honestscale.report._model import Model
from honestscale.report._plan import Plan, ScalingView, plan
from honestscale.report._text import environment


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
        exports, refused, contents = _write(model, pdf, html, staging, assets, partials)
    return Outputs(html or assets / "report.html", pdf, assets, exports, refused, contents.scaling,
                   contents.frameworks, contents.layouts)  # fmt: skip


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


def publish(template: str, context: dict[str, object], page: str, *, staging: Path, pdf: Path | None,
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
           partials: list[tuple[Path, Path]]) -> tuple[list[Path], list[str], Plan]:  # fmt: skip
    """Every file of the report into ``staging`` (named as they will be in ``assets``), the PDF beside its target;
    the figures' PDF files saved aside (``PaperCopies``) while the rest is drawn and laid out."""
    contents = plan(model)
    copies = PaperCopies()
    try:
        _figures.draw(contents.figures, staging, copies)
        for name, text in contents.tables:
            (staging / name).write_text(text(), encoding="utf-8")
        refused = publish("report.html.j2", {"model": model, "scaling": contents.scaling,
                                             "frameworks": contents.frameworks, "layouts": contents.layouts},
                          "report.html", staging=staging, pdf=pdf, html=html, assets=assets, partials=partials,
                          figures="fig")  # fmt: skip
    except BaseException:
        copies.abandon()
        raise
    copies.wait()
    return [assets / name for name in contents.exports], refused, contents
