"""Reading the reports the tests render: their text (pdftotext), their pages' margins (pdftoppm), the JSON a
command prints."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import cli
from tests.tools import require


def needs_poppler() -> list[pytest.MarkDecorator]:
    """The marks (``pytestmark``) that skip a module's report tests where poppler-utils is missing (never in CI:
    .ci/run installs it)."""
    require(
        shutil.which("pdftoppm"), "poppler-utils (pdftoppm)", "apt-get install poppler-utils", module=True
    )
    return []


def text_of(pdf: Path, first: int | None = None, last: int | None = None) -> str:
    pages = [*(["-f", str(first)] if first else []), *(["-l", str(last)] if last else [])]
    out = subprocess.run(
        ["pdftotext", *pages, str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    return " ".join(unicodedata.normalize("NFKC", out).split())  # NFKC: the fi, ffi ligatures as letters


def report_pdf(store: Path, out: Path, *args: str) -> Path:
    pdf = out / "report.pdf"
    result = cli("report", "--store", store, "-o", pdf, *args)
    assert result.returncode == 0, result.stderr
    return pdf


def report_json(*args: str | Path) -> Any:
    result = cli(*args)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def ink_in_side_margins(pdf: Path, folder: Path, dpi: int = 50, margin_mm: float = 18.0) -> list[str]:
    """Pages with dark pixels in the left or right page margin (the report's CSS: 18 mm), i.e. content that
    crossed them (a table or figure too wide). Header and footer live in the top and bottom margins."""
    subprocess.run(["pdftoppm", "-gray", "-r", str(dpi), str(pdf), str(folder / "p")], check=True)
    strip = int(margin_mm / 25.4 * dpi) - 4
    bad = []
    for page in sorted(folder.glob("p-*.pgm")):
        data = page.read_bytes()
        _magic, w, h, _maxval, pixels = re.match(rb"(P5)\s+(\d+)\s+(\d+)\s+(\d+)\s(.*)", data, re.S).groups()  # type: ignore[union-attr]
        img = np.frombuffer(pixels, dtype=np.uint8).reshape(int(h), int(w))
        sides = np.concatenate([img[:, :strip], img[:, -strip:]], axis=1)
        if (sides < 160).any():
            bad.append(page.name)
    assert list(folder.glob("p-*.pgm")), "no page rendered"
    return bad
