"""VTK files for ParaView (sim/output/vtk.py): fields and the phi = 0 interface read back and compared."""
import base64
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from latticelab.app.cli import main
from latticelab.sim.models import get_model

meshio = pytest.importorskip("meshio")
RUN = ["run", "cahn-hilliard", "--dim", "3", "--L", "12", "--dx", "0.5", "--seed", "4", "--steps", "4",
       "--every", "2", "--backend", "numpy"]


def final_phi():
    model = get_model("cahn-hilliard").create(backend="numpy", dim=3, L=12, dx=0.5, seed=4)
    model.step(4)
    return model.fields()["phi"]


def read_vti(path) -> tuple[dict, np.ndarray]:
    """The attributes of ImageData and the first array, decoded independently of the writer."""
    root = ET.parse(path).getroot()
    image = root.find("ImageData")
    array = image.find("Piece/PointData/DataArray")
    raw = base64.b64decode(array.text)
    nbytes = int(np.frombuffer(raw[:8], "<u8")[0])
    dtype = {"Float64": "<f8", "Float32": "<f4", "Int8": "i1"}[array.get("type")]
    return dict(image.attrib, name=array.get("Name")), np.frombuffer(raw[8:8 + nbytes], dtype)


def test_the_legacy_file_holds_the_last_field_as_meshio_reads_it(tmp_path):
    path = tmp_path / "run.vtk"
    assert main([*RUN, "--output", str(path)]) == 0
    mesh = meshio.read(path)
    phi = final_phi()
    assert mesh.points.shape == (12 ** 3, 3) and mesh.points[1].tolist() == [0.5, 0, 0]      # x fastest, spacing dx
    assert np.array_equal(mesh.point_data["phi"].reshape(-1).reshape(phi.shape, order="F"), phi)


def test_the_series_lists_image_data_and_interfaces_by_time(tmp_path):
    path = tmp_path / "run.pvd"
    assert main([*RUN, "--output", str(path)]) == 0
    entries = ET.parse(path).getroot().findall("Collection/DataSet")
    assert [(e.get("part"), e.get("file").split("/")[-1]) for e in entries][-2:] == [
        ("0", "fields_000000004.vti"), ("1", "interface_000000004.vtu")]
    assert len(entries) == 6 and float(entries[0].get("timestep")) == 0.0
    attrs, values = read_vti(tmp_path / entries[-2].get("file"))
    phi = final_phi()
    assert attrs["WholeExtent"] == "0 11 0 11 0 11" and attrs["Spacing"] == "0.5 0.5 0.5" and attrs["name"] == "phi"
    assert np.array_equal(values.reshape(phi.shape, order="F"), phi)
    surface = meshio.read(tmp_path / entries[-1].get("file"))
    triangles = surface.cells_dict["triangle"]
    assert len(triangles) > 0 and surface.points.min() >= 0 and surface.points.max() <= 11 * 0.5
    # every vertex lies on a grid edge whose two ends have phi on either side of 0
    cells = surface.points / 0.5
    on_edge = np.sum(np.abs(cells - np.round(cells)) > 1e-6, axis=1)
    assert np.all(on_edge <= 1)
    lo = np.floor(cells + 1e-9).astype(int)
    axis = np.argmax(np.abs(cells - np.round(cells)), axis=1)
    hi = lo.copy()
    hi[np.arange(len(hi)), axis] += on_edge
    a, b = phi[tuple(lo.T)], phi[tuple(np.minimum(hi, 11).T)]
    assert np.all(np.minimum(a, b) <= 0) and np.all(np.maximum(a, b) >= 0)
