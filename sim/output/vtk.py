"""Fields and interfaces for ParaView (issue 43), by a small writer of VTK's file formats.

``run.pvd``: a time series. Each snapshot writes the model's fields as one VTK XML image data file
(``run/fields_<step>.vti``: point data on the grid, spacing = the model's grid spacing, x fastest) and, for a
3D model with an interface (``HasInterface``: phi = 0 of Cahn-Hilliard), the interface as a triangle surface
found by marching cubes (``run/interface_<step>.vtu``, written by meshio); ``run.pvd`` lists them with their
model time and is replaced (atomically) after each snapshot, so ParaView opens the series written so far.

``run.vtk``: one legacy VTK file (structured points) of the fields at the last snapshot, for tools that read
one file (meshio, VisIt, older ParaView).

Every file is written atomically (sim/io.py); the series' folder must be new unless overwriting is allowed.
"""
from __future__ import annotations

import base64
import shutil
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from latticelab.sim.io import OutputExists, check_output, write_atomic
from latticelab.sim.output.background import BackgroundWriter, HostCopy
from latticelab.sim.output.metadata import grid_spacing

VTK_TYPES = {"int8": "Int8", "uint8": "UInt8", "int16": "Int16", "uint16": "UInt16", "int32": "Int32",
             "uint32": "UInt32", "int64": "Int64", "float32": "Float32", "float64": "Float64"}
LEGACY_TYPES = {"int8": "char", "uint8": "unsigned_char", "int16": "short", "int32": "int", "int64": "long",
                "float32": "float", "float64": "double"}


def _vtk_array(values: np.ndarray) -> np.ndarray:
    """Values in VTK point order (the first axis, x, fastest), bools as bytes."""
    values = np.asarray(values)
    if values.dtype == np.bool_:
        values = values.astype(np.uint8)
    return np.ascontiguousarray(values.ravel(order="F"))


def _extent(shape) -> str:
    dims = list(shape) + [1] * (3 - len(shape))
    return " ".join(f"0 {n - 1}" for n in dims)


def image_data_xml(fields: dict, spacing: float) -> bytes:
    """A VTK XML ImageData file (base64 binary arrays with a UInt64 byte count) of same-shaped fields."""
    shape = next(iter(fields.values())).shape
    extent = _extent(shape)
    arrays = []
    for name, values in fields.items():
        flat = _vtk_array(values).astype(np.dtype(values.dtype).newbyteorder("<") if values.dtype != np.bool_
                                         else np.uint8, copy=False)
        block = np.array([flat.nbytes], "<u8").tobytes() + flat.tobytes()
        arrays.append(f'        <DataArray type="{VTK_TYPES[flat.dtype.name]}" Name={quoteattr(name)} '
                      f'format="binary">{base64.b64encode(block).decode()}</DataArray>')
    first = quoteattr(next(iter(fields)))
    return ("<?xml version=\"1.0\"?>\n"
            '<VTKFile type="ImageData" version="1.0" byte_order="LittleEndian" header_type="UInt64">\n'
            f'  <ImageData WholeExtent="{extent}" Origin="0 0 0" Spacing="{spacing!r} {spacing!r} {spacing!r}">\n'
            f'    <Piece Extent="{extent}">\n      <PointData Scalars={first}>\n' + "\n".join(arrays) +
            "\n      </PointData>\n    </Piece>\n  </ImageData>\n</VTKFile>\n").encode()


def legacy_vtk(fields: dict, spacing: float, title: str) -> bytes:
    """A legacy VTK file (binary, structured points) of same-shaped fields."""
    shape = next(iter(fields.values())).shape
    dims = list(shape) + [1] * (3 - len(shape))
    parts = [f"# vtk DataFile Version 3.0\n{title[:250]}\nBINARY\nDATASET STRUCTURED_POINTS\n"
             f"DIMENSIONS {dims[0]} {dims[1]} {dims[2]}\nORIGIN 0 0 0\nSPACING {spacing!r} {spacing!r} {spacing!r}\n"
             f"POINT_DATA {int(np.prod(dims))}\n".encode()]
    for name, values in fields.items():
        flat = _vtk_array(values)
        kind = LEGACY_TYPES[flat.dtype.name]
        parts.append(f"SCALARS {name} {kind} 1\nLOOKUP_TABLE default\n".encode())
        parts.append(flat.astype(flat.dtype.newbyteorder(">")).tobytes() + b"\n")
    return b"".join(parts)


def collection_xml(entries: list[tuple[float, int, str]]) -> bytes:
    """A ParaView .pvd collection: (time, part, file) per data set."""
    rows = "\n".join(f'    <DataSet timestep="{t!r}" part="{part}" file={quoteattr(name)}/>'
                     for t, part, name in entries)
    return ('<?xml version="1.0"?>\n<VTKFile type="Collection" version="0.1" byte_order="LittleEndian">\n'
            f"  <Collection>\n{rows}\n  </Collection>\n</VTKFile>\n").encode()


class VtkWriter:
    """``.pvd``: a series of image data (and interface surfaces) per snapshot; ``.vtk``: the last snapshot."""

    def __init__(self, path, model, *, every: int = 1, overwrite: bool = False, inputs: dict | None = None):
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
            raise ValueError(f"every: must be a positive integer number of steps; got {every!r}")
        self.path, self.every, self._overwrite = Path(path), int(every), overwrite
        self.series_file = self.path.suffix.lower() == ".pvd"
        check_output(self.path, overwrite=overwrite)
        self._spacing = grid_spacing(model)
        self._title = f"latticelab {model.title}"
        self._level = getattr(model, "interface_level", None) if len(model.shape) == 3 else None
        self._entries: list[tuple[float, int, str]] = []
        self._last = None
        if self.series_file:
            self.folder = self.path.with_suffix("")
            if self.folder.exists():
                if not overwrite:
                    raise OutputExists(self.folder, "it exists already (the series' files go there); choose another "
                                                    "name or allow overwriting")
                shutil.rmtree(self.folder)
            self.folder.mkdir()
        self._writer = BackgroundWriter(self._write, name="latticelab-vtk")

    def due(self, step: int) -> bool:
        return step % self.every == 0

    def snapshot(self, model) -> None:
        copies = {name: HostCopy(array) for name, array in model.fields().items()}
        self._writer.put((float(model.time), int(model.step_count), copies))

    def series(self, times, steps, values) -> None:
        """VTK files hold fields only; the observables go to .zarr or CSV."""

    def _write(self, item) -> None:
        time_value, step, copies = item
        fields = {name: copy.result() for name, copy in copies.items()}
        if not self.series_file:
            self._last = fields
            return
        name = f"{self.folder.name}/fields_{step:09d}.vti"
        data = image_data_xml(fields, self._spacing)
        write_atomic(self.path.parent / name, lambda f: f.write(data), overwrite=True)
        self._entries.append((time_value, 0, name))
        if self._level is not None:
            surface = f"{self.folder.name}/interface_{step:09d}.vtu"
            write_surface(self.path.parent / surface, next(iter(fields.values())), self._level, self._spacing)
            self._entries.append((time_value, 1, surface))
        entries = collection_xml(self._entries)
        write_atomic(self.path, lambda f: f.write(entries), overwrite=True)

    def close(self) -> Path:
        self._writer.close()
        if not self.series_file and self._last is not None:
            data = legacy_vtk(self._last, self._spacing, self._title)
            write_atomic(self.path, lambda f: f.write(data), overwrite=self._overwrite)
        return self.path

    def abort(self) -> None:
        try:
            self._writer.close()
        except Exception:
            pass

    def describe(self) -> str:
        return f"wrote {self.path} (VTK; open in ParaView)"


def write_surface(path, volume: np.ndarray, level: float, spacing: float = 1.0, origin=(0.0, 0.0, 0.0),
                  overwrite: bool = True) -> Path:
    """The iso-surface ``volume == level`` (marching cubes) as a triangle mesh in a .vtu file (meshio), with
    points in (x, y, z) = array axes (0, 1, 2) times ``spacing`` plus ``origin``, and the normals; an empty
    surface is written as no cells. Written atomically; an existing file is kept unless ``overwrite``."""
    from latticelab.sim.analysis.marching_cubes import marching_cubes
    from latticelab.sim.output.extras import require, write_by_name
    (meshio,) = require(path, "meshio")
    check_output(path, overwrite=overwrite)
    mesh = marching_cubes(np.asarray(volume, np.float64), float(level), method="numpy")
    points = np.asarray(mesh.vertices, np.float64) * spacing + np.asarray(origin, np.float64)
    cells = [("triangle", np.asarray(mesh.faces, np.int64))] if mesh.n_faces else []
    out = meshio.Mesh(points, cells, point_data={"normals": np.asarray(mesh.normals, np.float32)})
    return write_by_name(path, lambda name: meshio.write(name, out, file_format="vtu", binary=True), overwrite,
                         suffix=".vtu")


def write_spectrum_surface(path, spectrum: np.ndarray, level: float, overwrite: bool = False) -> Path:
    """An iso-surface of a shifted 3D magnitude spectrum (sim/analysis/spectral.py), scaled so that its maximum
    is 1 (``level`` is a fraction of it, as in the Spectrum dock), in mode numbers k = index - n // 2."""
    spectrum = np.asarray(spectrum, np.float64)
    if spectrum.ndim != 3:
        raise ValueError(f"an iso-surface needs a 3D spectrum; this one has shape {spectrum.shape}")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level: must be a fraction of the maximum in (0, 1); got {level!r}")
    top = float(spectrum.max())
    origin = tuple(-(n // 2) for n in spectrum.shape)
    return write_surface(path, spectrum / (top if top > 0 else 1.0), level, 1.0, origin, overwrite)
