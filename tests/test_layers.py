"""The project's structure as a contract.

- Layering (import-linter, configured in pyproject.toml as napari does): ``sim`` imports neither ``render``,
  ``app``, ``bench``, PySide6 nor VisPy; ``render`` imports neither ``app``, ``bench`` nor PySide6; ``app``
  does not import ``bench``; models do not import each other.
- Each contract is shown to break when a forbidden import is added to a scratch copy of the packages.
- Packaging: everything installs under the one name ``latticelab`` (no top-level ``app`` or ``sim`` that
  another project could shadow); a wheel built from the sources carries every package, shader and CUDA
  kernel file and the console script, and pyproject.toml lists every package folder of the tree.
"""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "sim", "render", "shaders", "bench")  # the top-level folders installed as latticelab.<name>
ROOT_MODULES = ("__init__.py", "__main__.py", "version.py")  # the package latticelab itself
DATA_SUFFIXES = (".cu", ".cuh", ".h", ".glsl", ".vert", ".frag", ".geom", ".comp")  # must be installed

pytest.importorskip("importlinter", reason="import-linter is in the [test] extra: pip install -e .[test]")


def lint_imports(project: Path) -> subprocess.CompletedProcess:
    """Run import-linter on the packages under ``project`` with the repository's contracts."""
    code = (
        "import sys; from importlinter.cli import lint_imports; "
        f"sys.exit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True, no_logo=True))"
    )
    # PYTHONPATH first, so that `project`'s packages shadow an installed (editable or not) latticelab.
    env = {**_clean_env(), "PYTHONPATH": str(project)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def copy_packages(destination: Path) -> Path:
    """The repository's packages laid out as the tree (top-level folders beside the root modules)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "results")
    destination.mkdir(parents=True, exist_ok=True)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, destination / package, ignore=ignore)
    for name in ROOT_MODULES:
        shutil.copy2(ROOT / name, destination / name)
    return destination


def importable_copy(destination: Path) -> Path:
    """A copy importable as ``latticelab`` from ``destination`` (what PYTHONPATH gets)."""
    copy_packages(destination / "latticelab")
    return destination


def test_layering_contracts_hold():
    result = lint_imports(ROOT)
    report = result.stdout + result.stderr
    assert result.returncode == 0, f"import-linter found a broken layering contract:\n{report}"
    assert "0 broken" in report and "kept" in report, report


@pytest.mark.parametrize(
    ("importer", "forbidden"),
    [
        ("sim", "render"),
        ("sim", "app"),
        ("sim", "PySide6"),
        ("sim", "vispy"),
        ("sim", "bench"),
        ("render", "app"),
        ("render", "PySide6"),
        ("render", "bench"),
        ("app", "bench"),
        ("sim.models.ising", "sim.models._other_model"),
    ],
)
def test_a_forbidden_import_breaks_the_contract(tmp_path, importer, forbidden):
    project = importable_copy(tmp_path)
    if forbidden.startswith("sim.models."):
        model = project / "latticelab" / forbidden.replace(".", "/")
        model.mkdir()
        (model / "__init__.py").write_text("")
    (project / "latticelab" / importer.replace(".", "/") / "_forbidden_import.py").write_text(
        f"import {_qualified(forbidden)}\n")
    result = lint_imports(project)
    report = result.stdout + result.stderr
    assert result.returncode != 0, f"adding 'import {forbidden}' to {importer} went unnoticed:\n{report}"
    flowing = " ".join(report.split())   # import-linter wraps long lines
    assert f"latticelab.{importer}._forbidden_import -> {_qualified(forbidden)}" in flowing, report


def _qualified(module: str) -> str:
    return f"latticelab.{module}" if module.split(".")[0] in PACKAGES else module


def test_wheel_installs_shaders_kernels_and_command(tmp_path):
    pytest.importorskip("setuptools", minversion="70.1", reason="building the wheel needs setuptools>=70.1")
    source = copy_packages(tmp_path / "src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    out = tmp_path / "dist"
    build = (
        "import sys; from setuptools import build_meta; "
        f"print(build_meta.build_wheel({str(out)!r}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", build], cwd=source, env=_clean_env(), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    wheel = out / result.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))

    data_files = sorted(
        f"latticelab/{path.relative_to(ROOT).as_posix()}"
        for package in PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.is_file() and path.suffix in DATA_SUFFIXES
    )
    missing = [name for name in data_files if name not in names]
    assert not missing, (
        f"not installed by a non-editable install: {missing}; add their extension to "
        "[tool.setuptools.package-data] in pyproject.toml"
    )
    python_files = sorted(
        f"latticelab/{path.relative_to(ROOT).as_posix()}"
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "__pycache__" not in path.parts
    ) + [f"latticelab/{name}" for name in ROOT_MODULES]
    assert [name for name in python_files if name not in names] == []
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith((".dist-info", ".data"))}
    assert top_level == {"latticelab"}, f"the wheel installs other top-level names: {sorted(top_level)}"
    assert "latticelab = latticelab.__main__:main" in entry_points


def test_pyproject_lists_every_package_folder():
    import tomllib
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    folders = {"latticelab"} | {
        "latticelab." + ".".join(init.parent.relative_to(ROOT).parts)
        for package in PACKAGES
        for init in (ROOT / package).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert listed == folders, f"pyproject.toml [tool.setuptools] packages differs: {sorted(listed ^ folders)}"


def test_a_local_module_named_app_or_sim_does_not_shadow_latticelab(tmp_path):
    for name in ("app", "sim", "render"):
        (tmp_path / f"{name}.py").write_text("raise ImportError('a user module, not latticelab')\n")
    code = "import latticelab.app.commands.main, latticelab.sim.model, latticelab.render.field_view; print('ok')"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr


def test_python_m_latticelab_runs():
    result = subprocess.run([sys.executable, "-m", "latticelab", "--help"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "run" in result.stdout and "bench" in result.stdout


def string_imports(root: Path) -> list[tuple[str, str]]:
    """(importer, imported) for every ``importlib.import_module("latticelab....")`` (or ``__import__``) with a
    literal name in the package whose folder is ``root``: imports that grimp, which reads import statements,
    does not see."""
    found = []
    files = [root / name for name in ROOT_MODULES if (root / name).exists()]
    files += [path for package in PACKAGES for path in sorted((root / package).rglob("*.py"))
              if "__pycache__" not in path.parts]
    for path in files:
        parts = path.relative_to(root).with_suffix("").parts
        importer = ".".join(("latticelab", *(parts[:-1] if parts[-1] == "__init__" else parts)))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            target = node.args[0].value
            if name in ("import_module", "__import__") and isinstance(target, str) \
                    and target.split(".")[0] == "latticelab":
                found.append((importer, target))
    return found


def import_cycles() -> list[tuple[str, str]]:
    """The pairs (a, b) where a imports b and b, directly or through others, imports a; the imports are those
    of the package ``latticelab`` found first on sys.path, including those inside functions and those made
    through a string literal (``string_imports``)."""
    import importlib.util

    import grimp
    graph = grimp.build_graph("latticelab", include_external_packages=False, cache_dir=None)
    for importer, imported in string_imports(Path(importlib.util.find_spec("latticelab").origin).parent):
        graph.add_import(importer=importer, imported=imported)
    return sorted((a, b) for a in graph.modules for b in graph.find_modules_directly_imported_by(a)
                  if graph.find_shortest_chain(importer=b, imported=a))


def test_no_import_cycles():
    """No module imports, directly or through others, a module that imports it back (imports inside functions
    and through ``importlib`` strings count too): each piece can be read, tested and replaced on its own."""
    pytest.importorskip("grimp")
    cycles = import_cycles()
    assert not cycles, f"import cycles: {cycles}"


def test_a_cycle_through_an_importlib_string_is_found(tmp_path):
    """The cycle test sees an import made through ``importlib.import_module("latticelab....")``: app/cli.py and
    app/gui.py once imported each other that way, unseen."""
    pytest.importorskip("grimp")
    project = importable_copy(tmp_path)
    app = project / "latticelab" / "app"
    (app / "_cycle_a.py").write_text(
        "import importlib\n\n\ndef late():\n    return importlib.import_module('latticelab.app._cycle_b')\n")
    (app / "_cycle_b.py").write_text("from latticelab.app import _cycle_a  # noqa: F401\n")
    code = (f"import sys; sys.path[:0] = [{str(project)!r}, {str(Path(__file__).parent)!r}]; "
            "import test_layers; print(test_layers.import_cycles())")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_clean_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "('latticelab.app._cycle_a', 'latticelab.app._cycle_b')" in result.stdout, result.stdout
