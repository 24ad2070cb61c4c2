"""The README is a front door and the manual cannot drift: the README's length and its map of the package, every
page reachable from docs/index.md, every relative link resolving, the generated pages equal to a fresh render,
every command in the README's table, and versions stated in prose read from the code."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCS = REPO / "docs"
PAGES = [
    REPO / "README.md",
    REPO / "CONTRIBUTING.md",
    REPO / "tests" / "README.md",
    *sorted(DOCS.glob("*.md")),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # a code block's brackets are no links
    return [m for m in LINK.findall(text) if not re.match(r"[a-z]+:", m) and not m.startswith("#")]


def test_the_readme_is_a_front_door_of_at_most_200_lines() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move the manual's part into docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = [link for link in _links(page) if not (page.parent / link.split("#")[0]).exists()]
    assert not broken, f"{page.relative_to(REPO)}: links to nothing: {broken}"


def test_every_docs_page_is_reachable_from_the_index() -> None:
    seen, todo = set(), [DOCS / "index.md"]
    while todo:
        page = todo.pop()
        if page in seen or page.parent != DOCS:
            continue
        seen.add(page)
        todo += [
            (page.parent / link.split("#")[0]).resolve() for link in _links(page) if link.endswith(".md")
        ]
    assert not set(DOCS.glob("*.md")) - seen, "pages no link from docs/index.md reaches"


def test_the_readme_map_names_every_package_and_module_and_nothing_else() -> None:
    text = (REPO / "README.md").read_text()
    block = text[text.index("## Where things live") :].split("```")[1]
    named = set(re.findall(r"honestscale/(\w+)", block)) | set(re.findall(r"\b(\w+)(?:, |: )", block))
    package = REPO / "honestscale"
    parts = {p.stem for p in package.glob("*.py") if not p.name.startswith("__")}
    parts |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    assert not parts - named, f"the README's map leaves out {sorted(parts - named)}"
    listed = set(re.findall(r"^honestscale/(\w+)", block, flags=re.M))
    assert listed <= parts, f"the README's map names what is not there: {sorted(listed - parts)}"


def test_the_layout_page_is_generated_from_the_modules_docstrings() -> None:
    render = runpy.run_path(str(REPO / "scripts" / "layout_doc.py"))["render"]
    assert (DOCS / "layout.md").read_text() == render(), (
        "docs/layout.md is stale: .venv/bin/python scripts/layout_doc.py > docs/layout.md"
    )


def test_the_readme_table_names_every_command() -> None:
    import typer.main

    from honestscale.cli import app

    group = typer.main.get_group(app)
    text = (REPO / "README.md").read_text()
    table = text[text.index("## Commands") : text.index("## Where things live")]
    missing = []
    for name, command in group.commands.items():
        subs = getattr(command, "commands", None)
        for sub in subs or [None]:
            said = re.search(rf"`{name}\b[^`]*`" if sub is None else rf"`{name} [^`]*\b{sub}\b", table)
            if said is None and f"/ {sub}" not in table and f", `{sub}" not in table:
                missing.append(f"{name} {sub or ''}".strip())
    assert not missing, f"commands the README's table leaves out: {missing}"


def test_the_docs_name_the_contract_version_the_runners_write() -> None:
    """Prose that states a version reads it from the code: `"schema": N` is events.SCHEMA_VERSION, and the page says
    what each version up to it added."""
    from honestscale.events import SCHEMA_VERSION, VERSIONS

    text = (DOCS / "ingest.md").read_text()
    assert re.findall(r'versioned by `"schema": (\d+)`', text) == [str(SCHEMA_VERSION)]
    said = text[text.index('versioned by `"schema"') :][:600]
    assert all(f"{v} " in said for v in VERSIONS if v > 1), said


def test_the_site_nav_names_every_page() -> None:
    """mkdocs.yml's nav (the site's menu, in the index's order) names every docs page, and only pages that exist."""
    text = (REPO / "mkdocs.yml").read_text()
    named = set(re.findall(r"([\w-]+\.md)", text))
    pages = {p.name for p in DOCS.glob("*.md")}
    assert named == pages, (
        f"mkdocs.yml's nav: missing {sorted(pages - named)}, not there {sorted(named - pages)}"
    )
