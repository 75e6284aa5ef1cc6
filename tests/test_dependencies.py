"""Dependencies point one way: engagement is the core and imports no other app; ingestion,
readapi, marketplace and dashboard use engagement (and config) and never import each other."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("engagement", "ingestion", "readapi", "marketplace", "dashboard", "automations")


def imported_apps(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update(name.split(".")[0] for name in names)
    return found & set(APPS)


def test_no_app_imports_a_sibling_and_the_core_imports_none():
    wrong = []
    for app in APPS:
        allowed = {app} if app == "engagement" else {app, "engagement"}
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for other in imported_apps(path) - allowed:
                wrong.append(f"{relative} imports {other}")

    assert wrong == []
