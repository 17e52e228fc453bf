"""Import discipline over every module of ``src/isokernel``: a private name
(``_x``) is used only in the module that defines it, and the package root only
re-exports the public API. (The layering itself is import-linter's contract in
``pyproject.toml``.)"""

from __future__ import annotations

import ast
from pathlib import Path

import isokernel

PACKAGE = Path(isokernel.__file__).parent
ROOT = PACKAGE.parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    """Whether the dotted name is an isokernel module or package (a file)."""
    if name != "isokernel" and not name.startswith("isokernel."):
        return False
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _resolve(path: Path, node: ast.ImportFrom) -> str:
    """The absolute dotted module an ``import from`` names."""
    if not node.level:
        return node.module or ""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _modules() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{node.lineno}"


def _private_from_imports(path: Path, tree: ast.Module) -> list[str]:
    """``from M import _x`` where ``_x`` is a name defined in another
    isokernel module (importing a private submodule, ``from . import _blocks``,
    is allowed)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = _resolve(path, node)
        if not _is_module(source):
            continue
        for alias in node.names:
            if _is_private(alias.name) and not _is_module(f"{source}.{alias.name}"):
                found.append(f"{_where(path, node)}: from {source} import {alias.name}")
    return found


def _module_aliases(path: Path, tree: ast.Module) -> dict[str, str]:
    """Local names bound to isokernel modules by the module's imports."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_module(alias.name):
                    local = alias.asname or alias.name.split(".")[0]
                    aliases[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(path, node)
            for alias in node.names:
                if _is_module(f"{source}.{alias.name}"):
                    aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
    return aliases


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else [*head, node.attr]
    return None


def _private_attributes(path: Path, tree: ast.Module) -> list[str]:
    """``alias._x`` where ``alias`` names another isokernel module."""
    aliases, own = _module_aliases(path, tree), _module_name(path)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
            continue
        chain = _dotted(node.value)
        if chain is None or chain[0] not in aliases:
            continue
        module = aliases[chain[0]]
        for part in chain[1:]:
            if not _is_module(f"{module}.{part}"):
                break
            module = f"{module}.{part}"
        else:
            if module != own and not _is_module(f"{module}.{node.attr}"):
                found.append(f"{_where(path, node)}: {'.'.join(chain)}.{node.attr} ({module})")
    return found


def test_no_module_imports_another_modules_private_names():
    """What two modules share has a public name in the module that owns it:
    no ``from M import _x`` of another module's private name anywhere in
    isokernel (backends' strategies and core included)."""
    found = [hit for path, tree in _modules().items() for hit in _private_from_imports(path, tree)]
    assert found == [], "\n".join(found)


def test_no_module_reads_another_modules_private_attributes():
    """No ``alias._x`` where ``alias`` is an imported isokernel module."""
    found = [hit for path, tree in _modules().items() for hit in _private_attributes(path, tree)]
    assert found == [], "\n".join(found)


def _root_names(tree: ast.Module) -> tuple[list[str], list[str], list[str]]:
    """(what the root's imports bind, its ``__all__``, the statements that
    are neither an import, the docstring, ``__version__`` nor ``__all__``)."""
    bound, exported, other = [], [], []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            bound += [a.asname or a.name for a in node.names]
        elif isinstance(node, ast.Assign) and [_dotted(t) for t in node.targets] == [["__all__"]]:
            exported = list(ast.literal_eval(node.value))
        elif isinstance(node, ast.Assign) and [_dotted(t) for t in node.targets] == [
                ["__version__"]]:
            continue
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            other.append(f"line {node.lineno}: {ast.unparse(node).splitlines()[0]}")
    return bound, exported, other


def test_the_package_root_only_reexports_public_names():
    """``isokernel/__init__.py`` is imports from its subpackages, each name
    bound one that ``__all__`` lists (and the reverse), ``__version__`` and
    ``__all__``: no code, no private name, nothing from a private module."""
    path = PACKAGE / "__init__.py"
    tree = ast.parse(path.read_text())
    bound, exported, other = _root_names(tree)
    assert other == []
    private = [f"{_where(path, node)}: from {_resolve(path, node)} import {alias.name}"
               for node in tree.body if isinstance(node, ast.ImportFrom)
               for alias in node.names
               if any(_is_private(part) for part in
                      [*_resolve(path, node).split("."), alias.name, alias.asname or ""])]
    assert private == []
    assert sorted(set(bound) - set(exported)) == []
    assert sorted(set(exported) - set(bound)) == []
    assert len(exported) == len(set(exported))
