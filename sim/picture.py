"""What a model hands the view: one byte per cell and a palette of 256 colours (a ``Picture``).

Every model's picture reduces to byte codes, so one view (render/field_view.py), one texture format (r8) and
one GPU upload path serve them all:

- Models with a few discrete states (Ising spins, flipped, rewired) give their own ``CellEncoder``: a NumPy/
  CuPy function from their arrays to codes, its CUDA twin as a device function in a ``.cuh`` file, and a
  palette that maps each code to a colour.
- Models with a real-valued field (a concentration, a membrane potential) use ``scalar_picture``: the field
  is mapped linearly from its range onto codes 0..253 (254 colours of a colormap), code 254 marks a
  highlighted cell, code 255 a value outside the range is clamped, not coded.

The CUDA twin lets the GPU path encode and store into the OpenGL texture in a single kernel
(render/interop.py composes the model's device function with its surface writer), so a frame on the GPU
never makes an intermediate array or a host copy. The device function has this signature, with up to three
arrays (null when absent) and two float parameters::

    __device__ __forceinline__ unsigned char cell_code(long long i, const void* a0, const void* a1,
                                                        const void* a2, float f0, float f1);

and the tests compare it with ``encode`` cell by cell.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

SCALAR_LEVELS = 254                 # codes 0..253 carry the value
SCALAR_HIGHLIGHT = 254              # a highlighted cell
SCALAR_KERNEL = Path(__file__).resolve().parent / "kernels" / "scalar_codes.cuh"


@dataclass(frozen=True)
class CellEncoder:
    """How a model turns its arrays into byte codes: ``encode(xp, a0, a1, a2, f0, f1)`` on NumPy or CuPy, and
    ``cuda_source`` (a .cuh defining ``cell_code``) for the one-pass GPU path; ``name`` keys compiled kernels."""
    name: str
    encode: Callable[..., Any]
    cuda_source: Path | None = None


@dataclass(frozen=True)
class ColourBar:
    """What the colours of a real field mean, for a colour bar beside the view: ``label`` (and ``unit``) of the
    field, shown from ``vmin`` (code 0) to ``vmax`` (code ``SCALAR_LEVELS - 1``)."""
    label: str
    unit: str
    vmin: float
    vmax: float

    def __post_init__(self):
        if not (np.isfinite(self.vmin) and np.isfinite(self.vmax)) or self.vmax <= self.vmin:
            raise ValueError(f"colour_bar: vmin and vmax must be finite with vmin < vmax; "
                             f"got ({self.vmin}, {self.vmax})")

    @property
    def title(self) -> str:
        """"label [unit]" (or just the label)."""
        return f"{self.label} [{self.unit}]" if self.unit else self.label


@dataclass(frozen=True)
class Picture:
    """One frame's worth of what to draw.

    ``arrays``: up to three arrays of the cell shape on the model's device (None where absent), the encoder's
    inputs; ``scalars``: its two float parameters. ``palette``: (256, 4) float32 RGBA in [0, 1] per code (floats,
    so that the views shade exactly the colours the model chose). ``links``: (R, 2)
    flat cell indices of links to draw over the cells, or None. ``value_range``: for scalar pictures, the field
    values at code 0 and code 253.

    What the colours mean, for a key drawn beside the cells (render/legend.py): ``legend``, (label, code) pairs
    naming the codes of a picture of discrete states (the colour is the palette's, so key and cells cannot
    disagree) or the special codes of a scalar one (highlighted cells); ``colour_bar``, a ``ColourBar`` for a
    real field. Both optional: a picture without them is drawn without a key.

    ``slabs``: for a model split over devices, a ``SlabbedPicture`` (sim/multidevice/picture.py) whose parts
    encode their own slabs where they live; ``arrays`` are then empty and ``codes()`` assembles the slabs' codes
    on the host (the window assembles them on its display device instead: render/upload.py).
    """
    xp: Any
    shape: tuple[int, ...]
    encoder: CellEncoder
    arrays: tuple
    palette: np.ndarray
    scalars: tuple[float, float] = (0.0, 0.0)
    links: np.ndarray | None = None
    legend: tuple[tuple[str, int], ...] = field(default_factory=tuple)
    value_range: tuple[float, float] | None = None
    colour_bar: ColourBar | None = None
    slabs: Any = None

    def __post_init__(self):
        arrays = tuple(self.arrays) + (None,) * (3 - len(self.arrays))
        if len(arrays) != 3:
            raise ValueError(f"arrays: at most 3 encoder inputs; got {len(self.arrays)}")
        object.__setattr__(self, "arrays", arrays)
        palette = np.asarray(self.palette)
        if palette.shape != (256, 4) or palette.dtype != np.float32:
            raise ValueError(f"palette: must be (256, 4) float32; got {palette.dtype} {palette.shape}")
        for array in arrays:
            if array is not None and tuple(array.shape) != tuple(self.shape):
                raise ValueError(f"arrays: shape {tuple(array.shape)} differs from the picture's {self.shape}")
        legend = tuple(tuple(entry) for entry in self.legend)
        for entry in legend:
            if (len(entry) != 2 or not isinstance(entry[0], str) or isinstance(entry[1], bool)
                    or not isinstance(entry[1], (int, np.integer)) or not 0 <= entry[1] <= 255):
                raise ValueError(f"legend: each entry must be (label, code) with a code in 0..255; got {entry!r}")
        object.__setattr__(self, "legend", tuple((label, int(code)) for label, code in legend))
        if self.colour_bar is not None and not isinstance(self.colour_bar, ColourBar):
            raise ValueError(f"colour_bar: must be a ColourBar or None; got {type(self.colour_bar).__name__}")

    def codes(self):
        """uint8 codes of the cell shape, computed where the arrays live (``xp``; a split picture's on the host)."""
        if self.slabs is not None:
            return self.slabs.codes()
        return self.encoder.encode(self.xp, *self.arrays, *self.scalars)

    def colours(self, codes=None) -> np.ndarray:
        """RGBA uint8 per cell on the host: the picture at one pixel per cell."""
        from latticelab.sim.backend import to_numpy
        return palette_bytes(self.palette)[to_numpy(self.codes() if codes is None else codes)]


# ---- real-valued fields --------------------------------------------------------------------------------
def encode_scalar(xp, values, highlight, _unused, low: float, high: float):
    """Codes of a real field: floor((v - low) / (high - low) * 254) clamped to 0..253, highlight -> 254.
    NaN maps to 0. The NumPy/CuPy twin of sim/kernels/scalar_codes.cuh, in the same float32 arithmetic (a scale
    computed in float64 differs in the last bit for some ranges and moves values at code boundaries by one)."""
    low32, high32 = np.float32(low), np.float32(high)
    scale = np.float32(SCALAR_LEVELS) / (high32 - low32) if high32 > low32 else np.float32(0)
    v = (values.astype(xp.float32, copy=False) - low32) * scale
    v = xp.nan_to_num(v, nan=0.0)
    codes = xp.clip(xp.floor(v), 0, SCALAR_LEVELS - 1).astype(xp.uint8)
    if highlight is not None:
        codes = xp.where(highlight, xp.uint8(SCALAR_HIGHLIGHT), codes)
    return codes


SCALAR_ENCODER = CellEncoder("scalar", encode_scalar, SCALAR_KERNEL)


def scalar_palette(colormap: np.ndarray, highlight=(1.0, 1.0, 1.0, 1.0)) -> np.ndarray:
    """(256, 4) float32 palette from a colormap sampled at ``SCALAR_LEVELS`` points ((254, 3|4) floats in 0..1)."""
    cmap = np.asarray(colormap, np.float64)
    if cmap.shape[0] != SCALAR_LEVELS or cmap.shape[1] not in (3, 4):
        raise ValueError(f"colormap: must have {SCALAR_LEVELS} RGB(A) rows; got shape {cmap.shape}")
    if cmap.shape[1] == 3:
        cmap = np.column_stack([cmap, np.ones(len(cmap))])
    table = np.zeros((256, 4))
    table[:SCALAR_LEVELS] = cmap
    table[SCALAR_HIGHLIGHT] = highlight
    table[255] = cmap[-1]
    return np.clip(table, 0, 1).astype(np.float32)


def palette_bytes(palette: np.ndarray) -> np.ndarray:
    """The uint8 RGBA a framebuffer holds for each palette colour."""
    return np.round(np.asarray(palette, np.float64) * 255).astype(np.uint8)


def interpolated_colormap(anchors) -> np.ndarray:
    """``SCALAR_LEVELS`` RGB rows interpolated linearly between equally spaced anchor colours."""
    anchors = np.asarray(anchors, np.float64)
    x = np.linspace(0, 1, len(anchors))
    t = np.linspace(0, 1, SCALAR_LEVELS)
    return np.column_stack([np.interp(t, x, anchors[:, c]) for c in range(anchors.shape[1])])


# Colormaps as anchor colours (perceptually ordered): enough for a model to name one without a plotting library.
COLORMAPS = {
    # viridis, sampled at 9 points
    "viridis": ((0.267, 0.005, 0.329), (0.283, 0.141, 0.458), (0.254, 0.265, 0.530), (0.207, 0.372, 0.553),
                (0.164, 0.471, 0.558), (0.128, 0.567, 0.551), (0.135, 0.659, 0.518), (0.267, 0.749, 0.441),
                (0.478, 0.821, 0.318), (0.741, 0.873, 0.150), (0.993, 0.906, 0.144)),
    # blue - white - red, for fields symmetric about zero
    "coolwarm": ((0.230, 0.299, 0.754), (0.552, 0.690, 0.996), (0.866, 0.866, 0.866), (0.958, 0.604, 0.482),
                 (0.706, 0.016, 0.150)),
    # black - red - yellow - white, for potentials and activity
    "inferno": ((0.001, 0.000, 0.014), (0.258, 0.039, 0.406), (0.578, 0.148, 0.404), (0.865, 0.317, 0.226),
                (0.988, 0.645, 0.040), (0.988, 0.998, 0.645)),
}


@functools.lru_cache(maxsize=64)
def _colormap_palette(colormap: str, highlight_colour: tuple) -> np.ndarray:
    """The palette of a named colormap, made once (a picture is made every frame); read-only."""
    palette = scalar_palette(interpolated_colormap(COLORMAPS[colormap]), highlight_colour)
    palette.flags.writeable = False
    return palette


def scalar_picture(xp, values, low: float, high: float, colormap: str = "viridis", highlight=None,
                   highlight_colour=(1.0, 1.0, 1.0, 1.0), links=None, legend=(), label: str = "", unit: str = "",
                   highlight_label: str = "") -> Picture:
    """A picture of a real field shown through ``colormap`` over [low, high], optionally with highlighted cells.
    ``label`` and ``unit`` name the field for the colour bar (none without a label); ``highlight_label`` says
    what a highlighted cell is, for the legend (only while cells are highlighted)."""
    if colormap not in COLORMAPS:
        raise ValueError(f"colormap: must be one of {', '.join(COLORMAPS)}; got {colormap!r}")
    if not (np.isfinite(low) and np.isfinite(high)) or high <= low:
        raise ValueError(f"range: must be finite with low < high; got ({low}, {high})")
    palette = _colormap_palette(colormap, tuple(float(c) for c in highlight_colour))
    legend = tuple(legend)
    if highlight is not None and highlight_label:
        legend += ((highlight_label, SCALAR_HIGHLIGHT),)
    colour_bar = ColourBar(label, unit, float(low), float(high)) if label else None
    return Picture(xp, tuple(values.shape), SCALAR_ENCODER, (values, highlight), palette,
                   scalars=(float(low), float(high)), links=links, legend=legend,
                   value_range=(float(low), float(high)), colour_bar=colour_bar)
