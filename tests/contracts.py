"""The architecture's own import-linter contract types (``[tool.importlinter] contract_types``).

``fronts``: each command-line module imports the CLI itself, the modules every room shares, and the one package it
fronts, nothing else (its direct imports; what the package imports in turn is that package's business). Every
module of the CLI is named with the package it fronts, so that a new module says what it fronts.
"""

from __future__ import annotations

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class FrontsContract(Contract):
    """Options: ``package`` (the CLI), ``shared`` (modules any of its modules may import) and ``fronts``
    (``module: package`` for every module of the CLI)."""

    type_name = "fronts"
    package = fields.StringField()
    shared = fields.ListField(subfield=fields.StringField())
    fronts = fields.ListField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        package = str(self.package)
        shared: list[str] = [str(s) for s in self.shared]  # type: ignore[attr-defined]
        pairs = [str(f).split(":", 1) for f in self.fronts]  # type: ignore[attr-defined]
        fronted = {m.strip(): p.strip() for m, p in pairs}
        root = package.split(".")[0]
        modules = {m for m in graph.modules if m == package or m.startswith(package + ".")}
        unnamed = sorted(modules - set(fronted))
        broken: list[tuple[str, str, str]] = []  # (module, imported, what it fronts)
        for module in sorted(modules & set(fronted)):
            allowed = [package, *shared, fronted[module]]
            for imported in sorted(graph.find_modules_directly_imported_by(module)):
                if imported != root and not imported.startswith(root + "."):
                    continue  # another distribution: not the architecture's business
                if imported == root or any(imported == a or imported.startswith(a + ".") for a in allowed):
                    continue
                broken.append((module, imported, fronted[module]))
        return ContractCheck(kept=not broken and not unnamed, metadata={"broken": broken, "unnamed": unnamed})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for module, imported, fronts in check.metadata["broken"]:
            output.print_error(f"{module} fronts {fronts} but imports {imported}", bold=False)
        for module in check.metadata["unnamed"]:
            output.print_error(f"{module} is named in no `fronts`: say which package it fronts", bold=False)
        output.new_line()
