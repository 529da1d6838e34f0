"""The project's structure as a contract.

- Layering (import-linter, configured in pyproject.toml as napari does): ``sim`` imports neither ``render``,
  ``app``, PySide6 nor VisPy; ``render`` imports neither ``app`` nor PySide6.
- Each contract is shown to break when a forbidden import is added to a scratch copy of the packages.
- Packaging: a wheel built from the sources carries every shader and CUDA kernel file and the console script.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "sim", "render", "shaders")
DATA_DIRS = ("shaders", "sim/kernels")  # every non-Python file here must be installed

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
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, destination / package, ignore=ignore)
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
        ("render", "app"),
        ("render", "PySide6"),
    ],
)
def test_a_forbidden_import_breaks_the_contract(tmp_path, importer, forbidden):
    project = copy_packages(tmp_path)
    (project / importer / "_forbidden_import.py").write_text(f"import {forbidden}\n")
    result = lint_imports(project)
    report = result.stdout + result.stderr
    assert result.returncode != 0, f"adding 'import {forbidden}' to {importer} went unnoticed:\n{report}"
    assert f"{importer}._forbidden_import -> {forbidden}" in report, report


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
        path.relative_to(ROOT).as_posix()
        for folder in DATA_DIRS
        if (ROOT / folder).is_dir()
        for path in (ROOT / folder).iterdir()
        if path.is_file() and path.suffix not in (".py", ".pyc") and path.name != ".gitkeep"
    )
    missing = [name for name in data_files if name not in names]
    assert not missing, (
        f"not installed by a non-editable install: {missing}; add their extension to "
        "[tool.setuptools.package-data] in pyproject.toml"
    )
    python_files = sorted(
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "__pycache__" not in path.parts
    )
    assert [name for name in python_files if name not in names] == []
    assert "latticelab = app.cli:main" in entry_points
