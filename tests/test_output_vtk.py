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
    assert surface.points.min() >= 0 and surface.points.max() <= 11 * 0.5
    assert_on_level(surface, phi, 0.0, spacing=0.5)


def assert_on_level(surface, volume, level, spacing=1.0, origin=0.0):
    """The surface has triangles, and every vertex lies on a grid edge whose two ends are on either side of
    ``level`` (what an iso-surface of the volume is, whoever computed it)."""
    assert len(surface.cells_dict["triangle"]) > 0
    cells = (surface.points - origin) / spacing
    off = np.abs(cells - np.round(cells)) > 1e-6
    assert np.all(off.sum(axis=1) <= 1)
    lo = np.floor(cells + 1e-9).astype(int)
    hi = lo + off
    a, b = volume[tuple(lo.T)], volume[tuple(hi.T)]
    assert np.all(np.minimum(a, b) <= level + 1e-12) and np.all(np.maximum(a, b) >= level - 1e-12)


def test_a_spectrum_iso_surface_for_paraview_sits_on_its_level_in_mode_numbers(tmp_path):
    from latticelab.sim.analysis import spectral
    rng = np.random.default_rng(3)
    k = np.indices((16, 16, 16)) - 8
    magnitude = np.exp(-(k ** 2).sum(axis=0) / 20.0) + 0.01 * rng.random((16, 16, 16))
    record = spectral.SpectrumRecord.single(magnitude, iso=0.4)
    path = spectral.export(record, tmp_path / "spectrum.vtu", "iso-vtu")
    surface = meshio.read(path)
    assert_on_level(surface, record.mean / record.mean.max(), 0.4, origin=-8.0)
    assert np.abs(surface.points).max() < 8                    # a ball about k = 0
    with pytest.raises(FileExistsError):
        spectral.export(record, path, "iso-vtu")                # never over an existing file unless asked
    with pytest.raises(ValueError, match="3D"):
        spectral.export(spectral.SpectrumRecord.single(magnitude[0]), tmp_path / "flat.vtu", "iso-vtu")


@pytest.mark.gpu
def test_a_gpu_run_s_series_holds_each_snapshot_bit_for_bit(tmp_path):
    """Snapshots of a CUDA model go through the device copy and the asynchronous host copy while the next
    steps change phi: each .vti holds phi at its own step."""
    from latticelab.sim.backend import to_numpy
    from latticelab.sim.output import open_output, record_step
    model = get_model("cahn-hilliard").create(backend="cuda", dim=3, L=32, dx=0.5, seed=4)
    writer = open_output(tmp_path / "gpu.pvd", model, every=2)
    kept = {}
    for _ in range(8):
        model.step(1)
        record_step(writer, model)
        if writer.due(model.step_count):
            kept[model.step_count] = to_numpy(model.fields()["phi"]).copy()
    writer.close()
    assert len(kept) == 4
    for step, phi in kept.items():
        _attrs, values = read_vti(tmp_path / "gpu" / f"fields_{step:09d}.vti")
        assert np.array_equal(values.reshape(phi.shape, order="F"), phi)
    assert_on_level(meshio.read(tmp_path / "gpu" / "interface_000000008.vtu"), kept[8], 0.0, spacing=0.5)
