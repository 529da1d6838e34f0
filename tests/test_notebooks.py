"""The example notebooks (examples/notebooks/) run from top to bottom in a real Jupyter kernel (nbclient), and
what their last cell reports is checked: the field's shape, a finite observable, the file they wrote."""
import ast
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")
pytest.importorskip("xarray")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "examples" / "notebooks"


def run_notebook(name: str, folder: Path) -> dict:
    shutil.copy(NOTEBOOKS / name, folder / name)
    book = nbformat.read(folder / name, as_version=4)
    nbclient.NotebookClient(book, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}}).execute()
    (cell,) = [c for c in book.cells if "result" in c.metadata.get("tags", [])]
    (output,) = [o for o in cell.outputs if o.output_type == "execute_result"]
    return ast.literal_eval(output.data["text/plain"])


def test_every_model_has_a_notebook():
    from latticelab.sim.models import model_names
    assert sorted(p.stem.replace("_", "-") for p in NOTEBOOKS.glob("*.ipynb")) == sorted(model_names())


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name, field, shape", [("ising.ipynb", "spins", [5, 64, 64]),
                                                ("cahn_hilliard.ipynb", "phi", [5, 32, 32])])
def test_a_lattice_notebook_writes_a_store_xarray_opens(tmp_path, name, field, shape):
    import xarray as xr
    result = run_notebook(name, tmp_path)
    assert result["field_shape"] == shape and result["snapshots"] == shape[0]
    assert all(math.isfinite(v) for k, v in result.items() if isinstance(v, float))
    store = xr.open_zarr(tmp_path / result["store"])
    assert list(store[field].shape) == shape and np.isfinite(store[field].values).all()


@pytest.mark.timeout(900)
def test_the_cortex_notebook_writes_spike_trains_pynwb_reads(tmp_path):
    pynwb = pytest.importorskip("pynwb")
    result = run_notebook("cortex.ipynb", tmp_path)
    assert result["field_shape"] == [1, 32, 32] and math.isfinite(result["eeg"]) and result["spikes"] > 0
    with pynwb.NWBHDF5IO(str(tmp_path / result["store"]), "r") as io:
        assert len(io.read().units) == 32 * 32
