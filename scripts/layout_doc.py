"""Write docs/layout.md: every module of the honestscale package with the first paragraph of its docstring.

Run ``python scripts/layout_doc.py > docs/layout.md``; tests/unit/test_docs.py checks the committed page against a
fresh render, so a module added, renamed or redescribed changes the page in the same commit."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "honestscale"

INTRO = """# Where things live

Generated from the modules' docstrings by `python scripts/layout_doc.py > docs/layout.md`; do not edit by hand.

The folders say what the system does: **orchestrate** (campaign, runners) → **record** (events, record, collector,
store) → **judge** (view, analysis, lint, compare) → **present** (report, advise, serve), with a thin CLI on top.
`import-linter` keeps the boundaries (`[tool.importlinter]` in `pyproject.toml`, run by
`tests/unit/test_architecture.py`): one `layers` contract from the CLI down to the event contract, with no import
back up; no circle between the modules of any package; runners import nothing of the rest; judging imports neither
the collector, the runners, the campaigns nor the CLI. Only `store/` and `collector/` import DuckDB, and only the
CLI, the campaigns and the dashboard hold a connection: every judge reads the one view built from the store. A
module whose name starts with `_` is its package's own; no module reaches into another package's.
"""


def _summary(path: Path) -> str:
    """The module's docstring's first paragraph; a rule module's, its rule class's (the module has none)."""
    tree = ast.parse(path.read_text())
    doc = ast.get_docstring(tree)
    if doc is None:
        rules = [
            n
            for n in tree.body
            if isinstance(n, ast.ClassDef)
            and any(
                isinstance(s, ast.Assign | ast.AnnAssign) and "code" in ast.unparse(s).split("=")[0]
                for s in n.body
            )
        ]
        doc = ast.get_docstring(rules[0]) if rules else None
    if doc is None:
        return "(no docstring)"
    text = " ".join(doc.split("\n\n")[0].split()).replace("``", "`")
    return text.replace(":class:", "").replace("|", "\\|")


def render() -> str:
    out = [INTRO]
    packages = sorted({p.parent for p in PACKAGE.rglob("*.py")}, key=lambda p: p.relative_to(ROOT).parts)
    for package in packages:
        name = package.relative_to(ROOT).as_posix()
        out += [f"\n## `{name}/`\n", "| module | what it is |", "|---|---|"]
        for module in sorted(package.glob("*.py")):
            out.append(f"| `{module.name}` | {_summary(module)} |")
    data = sorted(
        p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*") if p.suffix in {".toml", ".json"}
    )
    out += ["\n## Data beside the code\n", *(f"- `{p}`" for p in data)]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
