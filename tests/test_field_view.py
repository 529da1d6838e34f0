"""The field view (render/field_view.py) draws what a model hands it, a Picture (sim/picture.py): byte codes
through the picture's palette, in 2D, as the 3D cube (peeled) and unfolded, with the picture's links on top.

- Pixel tests read real rendered pixels (Qt under Xvfb here, EGL on the GPU machine) at the cells' centres
  and compare them with the palette colour of each cell's code: Ising pictures and a real field through a
  colormap (``scalar_picture``).
- The CUDA twins of the encoders (the ``.cuh`` files' ``cell_code`` / ``cell_code4``) and the one-pass surface
  writer composed from them (render/interop.py: encoder_source) run on the CPU emulator of CUDA kernels
  (sim/gpu/emulate.py) and must give ``encode(...)``'s codes cell by cell; tests/test_interop.py checks the
  same composed kernel on a real GPU through a GL texture.
"""
from __future__ import annotations


import numpy as np
import pytest

from helpers import scene_canvas

from latticelab.render import interop
from latticelab.sim.models.ising import picture as ising
from latticelab.sim.picture import (SCALAR_ENCODER, SCALAR_HIGHLIGHT, CellEncoder, Picture, encode_scalar,
                                    palette_bytes, scalar_picture)

SIZE = 200


# ------------------------------------------------------------------------------------ helpers ---


def _scene_canvas():
    return scene_canvas(SIZE)


@pytest.fixture
def view():
    from latticelab.render.field_view import FieldView

    canvas = _scene_canvas()
    field_view = FieldView(canvas.central_widget.add_view())
    yield field_view
    interop.interop_for(canvas).release()
    canvas.close()


def _render(view):
    return view.viewbox.canvas.render(alpha=False)


def _cell_centres(shape, z=None):
    """World points of the centres of an (H, W) grid of cells, in row-major [y, x] order."""
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    points = np.column_stack([x.ravel() + 0.5, y.ravel() + 0.5])
    return points if z is None else np.column_stack([points, np.full(len(points), float(z))])


def _pixels_at(image, canvas_xy):
    cols, rows = np.floor(canvas_xy[:, 0]).astype(int), np.floor(canvas_xy[:, 1]).astype(int)
    assert cols.min() >= 0 and rows.min() >= 0 and cols.max() < image.shape[1] and rows.max() < image.shape[0]
    return image[rows, cols, :3]


def _expected(picture, codes=None):
    """RGB (N, 3) of every cell in row-major order: the palette colour of its code."""
    codes = picture.codes() if codes is None else codes
    return palette_bytes(picture.palette)[np.asarray(codes).ravel(), :3]


def _top_view(view):
    camera = view.camera_3d
    camera.fov = 0.0          # orthographic
    camera.elevation = 90.0   # looking down the z axis
    camera.azimuth = 0.0
    view.reset_camera()


def _random_ising(xp, shape, seed, rewired=False, links=None):
    rng = np.random.default_rng(seed)
    spins = np.where(rng.random(shape) < 0.5, 1, -1).astype(np.int8)
    flipped = rng.random(shape) < 0.2
    marks = rng.random(shape) < 0.1 if rewired else None
    return ising.ising_picture(xp, xp.asarray(spins), xp.asarray(flipped),
                               None if marks is None else xp.asarray(marks), links)


def _random_field(shape, seed, low=-1.0, high=2.0):
    rng = np.random.default_rng(seed)
    values = rng.uniform(low - 0.3, high + 0.3, shape).astype(np.float32)
    mask = rng.random(shape) < 0.05
    return values, mask


def _each_layer(view, picture, check):
    """``check(z, rgb of layer z's cells)`` for every tile of the unfolded grid."""
    from latticelab.render.unfold import UnfoldLayout

    image = _render(view)
    layout = UnfoldLayout(picture.shape[0])
    for z in range(picture.shape[0]):
        x0, y0 = layout.tile_origin(z)
        check(z, _pixels_at(image, view.world_to_canvas(_cell_centres(picture.shape[1:]) + [x0, y0])))


# ------------------------------------------------------------------------ pixels: Ising codes ---

def test_an_ising_picture_is_drawn_in_the_palette_colours_in_2d(view):
    picture = _random_ising(np, (16, 16), seed=1, rewired=True)
    view.show(picture)
    assert view.active_mode == "2d" and view.legend == picture.legend
    colours = _pixels_at(_render(view), view.world_to_canvas(_cell_centres((16, 16))))
    np.testing.assert_array_equal(colours, _expected(picture))
    assert len(np.unique(colours, axis=0)) == 5  # down, up, flipped to down, flipped to up, rewired

    # the palette alone changes the picture: the same spins without highlight and marks
    plain = ising.ising_picture(np, picture.arrays[0])
    view.show(plain)
    colours = _pixels_at(_render(view), view.world_to_canvas(_cell_centres((16, 16))))
    np.testing.assert_array_equal(colours, _expected(plain))
    assert len(np.unique(colours, axis=0)) == 2


def test_a_rectangular_2d_picture_fills_its_own_extent(view):
    picture = _random_ising(np, (10, 22), seed=2)
    view.show(picture)
    colours = _pixels_at(_render(view), view.world_to_canvas(_cell_centres((10, 22))))
    np.testing.assert_array_equal(colours, _expected(picture))


def test_the_cube_top_face_shows_the_top_layer_left_after_peeling(view):
    L = 8
    picture = _random_ising(np, (L, L, L), seed=3, rewired=True)
    view.show(picture)
    assert view.active_mode == "cube" and view.viewbox.camera is view.camera_3d
    _top_view(view)
    codes = picture.codes()
    for peel in (0, 1, 5, 7):
        view.set_peel(peel)
        top = L - view.peel
        colours = _pixels_at(_render(view), view.world_to_canvas(_cell_centres((L, L), z=top)))
        # the top face is lit at full strength (shade 1): the exact palette colours of layer top - 1
        np.testing.assert_array_equal(colours, _expected(picture, codes[top - 1]), err_msg=f"peel {peel}")
    view.set_peel(99)
    assert view.peel == L - 1


def test_the_unfolded_cube_shows_every_layer_as_a_tile(view):
    L = 6
    picture = _random_ising(np, (L, L, L), seed=4)
    view.set_mode_3d("unfold")
    view.show(picture)
    assert view.active_mode == "unfold" and view.viewbox.camera is view.camera_2d
    codes = picture.codes()

    def check(z, colours):
        np.testing.assert_array_equal(colours, _expected(picture, codes[z]), err_msg=f"layer {z}")

    _each_layer(view, picture, check)
    with pytest.raises(ValueError, match="mode"):
        view.set_mode_3d("slices")


# ------------------------------------------------------------------ pixels: a real-valued field ---

def test_a_scalar_field_is_drawn_through_its_colormap_in_2d(view):
    values, mask = _random_field((14, 14), seed=5)
    picture = scalar_picture(np, values, -1.0, 2.0, "viridis", highlight=mask)
    view.show(picture)
    assert view.value_range == (-1.0, 2.0)
    colours = _pixels_at(_render(view), view.world_to_canvas(_cell_centres((14, 14))))
    codes = encode_scalar(np, values, mask, None, -1.0, 2.0)
    np.testing.assert_array_equal(colours, palette_bytes(picture.palette)[codes.ravel(), :3])
    # the colormap really varies over the field, the highlight colour is there, out-of-range cells clamp
    assert len(np.unique(colours, axis=0)) > 40
    np.testing.assert_array_equal(colours[mask.ravel()], np.tile(palette_bytes(picture.palette)[SCALAR_HIGHLIGHT, :3],
                                                                 (mask.sum(), 1)))
    below = (values < -1.0).ravel() & ~mask.ravel()
    assert below.any() and (colours[below] == palette_bytes(picture.palette)[0, :3]).all()

    # another colormap over another range: only the palette and the codes change
    picture = scalar_picture(np, values, 0.0, 1.0, "inferno")
    view.show(picture)
    colours = _pixels_at(_render(view), view.world_to_canvas(_cell_centres((14, 14))))
    np.testing.assert_array_equal(colours, _expected(picture))


def test_a_scalar_field_is_drawn_through_its_colormap_in_3d(view):
    L = 7
    values, mask = _random_field((L, L, L), seed=6)
    picture = scalar_picture(np, values.astype(np.float64), -1.0, 2.0, "coolwarm", highlight=mask)
    codes = encode_scalar(np, values, mask, None, -1.0, 2.0)
    view.show(picture)
    _top_view(view)
    colours = _pixels_at(_render(view), view.world_to_canvas(_cell_centres((L, L), z=L)))
    np.testing.assert_array_equal(colours, _expected(picture, codes[L - 1]))
    assert len(np.unique(colours, axis=0)) > 15

    view.set_mode_3d("unfold")

    def check(z, colours):
        np.testing.assert_array_equal(colours, _expected(picture, codes[z]), err_msg=f"layer {z}")

    _each_layer(view, picture, check)


# ------------------------------------------------------------------------------------ links ---

def _link_pixels(image) -> int:
    """How many pixels show the (magenta, partly transparent) link colour over black cells or the background."""
    rgb = image[..., :3].astype(int)
    return int(((rgb[..., 0] - rgb[..., 1] > 60) & (rgb[..., 2] - rgb[..., 1] > 30)).sum())


def test_links_are_drawn_over_the_cells_and_reuploaded_only_when_they_change(view, monkeypatch):
    L = 16
    spins = np.ones((L, L), np.int8)  # black cells: link-coloured pixels come from the links alone
    links = np.array([[0, L * L - 1], [3, 5 * L + 12], [L - 1, (L - 1) * L]], np.int64)
    view.show(ising.ising_picture(np, spins))
    assert not view.links.visible and view.links_total == 0
    assert _link_pixels(_render(view)) == 0

    uploads = []
    original = view.links.set_positions
    monkeypatch.setattr(view.links, "set_positions", lambda positions: (uploads.append(len(positions)),
                                                                       original(positions)))
    view.show(ising.ising_picture(np, spins, links=links))
    assert view.links.visible and view.endpoints.visible
    assert view.links_shown == view.links_total == 3 and uploads == [6]
    image = _render(view)
    # the diagonal from cell (0, 0) to cell (15, 15) is drawn: the middle of the segment has the link colour
    middle = view.world_to_canvas(np.array([[L / 2, L / 2]]))
    assert _link_pixels(_pixels_at(image, middle)[None]) == 1
    assert _link_pixels(image) > 3 * SIZE / 2

    view.show(ising.ising_picture(np, spins, links=links))  # the same array: nothing to upload
    assert uploads == [6]
    view.show(ising.ising_picture(np, spins, links=links[:2].copy()))  # a new array
    assert uploads == [6, 4] and view.links_shown == 2
    view.show(ising.ising_picture(np, spins))  # no links: hidden
    assert not view.links.visible and view.links_total == 0
    assert _link_pixels(_render(view)) == 0


def test_many_links_are_subsampled_evenly(view, monkeypatch):
    from latticelab.render import field_view

    monkeypatch.setattr(field_view, "MAX_LINKS_DRAWN", 50)
    L = 20
    rng = np.random.default_rng(8)
    links = rng.integers(0, L * L, (400, 2))
    view.show(ising.ising_picture(np, np.ones((L, L), np.int8), links=links))
    assert view.links_total == 400 and view.links_shown == 50
    np.testing.assert_array_equal(view._link_sites[[0, -1]], links[[0, -1]])


def test_links_in_3d_follow_the_cube_and_the_unfolded_grid(view):
    from latticelab.render.unfold import UnfoldLayout

    L = 6
    ends = np.array([[0, 0, 0], [L - 1, L - 2, L - 1]])        # (z, y, x) of the link's two cells
    links = np.ravel_multi_index(ends.T, (L,) * 3)[None]
    view.show(ising.ising_picture(np, np.ones((L, L, L), np.int8)))
    _top_view(view)
    assert _link_pixels(_render(view)) == 0
    view.show(ising.ising_picture(np, np.ones((L, L, L), np.int8), links=links))
    assert view.links.visible and view.links_shown == 1
    # cube: the segment between the two cell centres (x, y, z), seen through the cells
    middle = (ends[:, ::-1] + 0.5).mean(axis=0)
    image = _render(view)
    assert _link_pixels(_pixels_at(image, view.world_to_canvas(middle[None]))[None]) == 1
    # peeled below the link's upper end: the part above the top is not drawn
    high = np.array([0.1, 0.9]) @ (ends[:, ::-1] + 0.5)         # near the end at z = L - 1
    assert _link_pixels(_pixels_at(image, view.world_to_canvas(high[None]))[None]) == 1
    view.set_peel(L - 1)
    assert _link_pixels(_pixels_at(_render(view), view.world_to_canvas(high[None]))[None]) == 0
    # unfolded: between the two cells' places in their tiles
    view.set_mode_3d("unfold")
    layout = UnfoldLayout(L)
    flat = layout.unfold_positions(ends) + 0.5
    image = _render(view)
    for t in (0.3, 0.5, 0.7):
        point = flat[0] * (1 - t) + flat[1] * t
        assert _link_pixels(_pixels_at(image, view.world_to_canvas(point[None]))[None]) == 1, t


# ------------------------------------------------------------------------------ shape rules ---

def test_pictures_that_are_neither_images_nor_cubes_are_refused(view):
    raw = CellEncoder("raw", lambda xp, a0, a1, a2, f0, f1: a0)
    palette = np.zeros((256, 4), np.float32)
    for shape in ((5,), (2, 3, 4), (2, 2, 2, 2)):
        with pytest.raises(ValueError, match="picture"):
            view.show(Picture(np, shape, raw, (np.zeros(shape, np.uint8),), palette))


def test_raw_codes_with_any_palette_are_drawn_as_given(view):
    """A model may hand ready codes with an identity encoder; every one of the 256 codes gets its colour."""
    raw = CellEncoder("raw", lambda xp, a0, a1, a2, f0, f1: a0)
    codes = np.arange(256, dtype=np.uint8).reshape(16, 16)
    rng = np.random.default_rng(9)
    palette = rng.integers(0, 256, (256, 4)).astype(np.float32) / 255
    palette[:, 3] = 1.0
    view.show(Picture(np, (16, 16), raw, (codes,), palette))
    colours = _pixels_at(_render(view), view.world_to_canvas(_cell_centres((16, 16))))
    np.testing.assert_array_equal(colours, palette_bytes(palette)[codes.ravel(), :3])


def test_before_step_does_nothing_off_the_interop_path(view):
    view.show(_random_ising(np, (8, 8), seed=10))
    view.before_step()
    gpu = interop.interop_for(view.viewbox.canvas)
    if gpu.enabled:
        pytest.skip("this canvas has CUDA-GL interop: tests/test_interop_views.py covers before_step there")
    assert gpu.resources() == 0


# ------------------------------------------------- CUDA twins of the encoders, on the CPU emulator ---

CODES_PRELUDE = "#include <math.h>  // floorf, as on the device\n"
CODES_KERNEL = r"""
// Each unit writes the code of one cell (WIDE = 1) or of four consecutive cells (WIDE = 4, cell_code4).
template <int WIDE>
__global__ void codes_to_buffer(const void* a0, const void* a1, const void* a2, float f0, float f1,
                                unsigned char* out, long long units)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < units; i += stride) {
#ifdef LATTICELAB_HAS_CELL_CODE4
        if (WIDE == 4) {
            const unsigned int code = cell_code4(i, a0, a1, a2, f0, f1);
            for (int k = 0; k < 4; ++k) out[4 * i + k] = (unsigned char)(code >> (8 * k));
            continue;
        }
#endif
        out[i] = cell_code(i, a0, a1, a2, f0, f1);
    }
}
"""

# The tests' stand-in for a CUDA surface object: the handle is the address of {data, width in bytes, height,
# depth, out-of-range or misaligned stores}; surf2Dwrite / surf3Dwrite store sizeof(T) bytes at byte x.
EMULATED_SURFACE = r"""
#include <math.h>
#include <string.h>
typedef unsigned long long cudaSurfaceObject_t;
struct EmulatedSurface { unsigned char* data; long long width, height, depth, bad; };
template <typename T> void emulated_store(const T value, cudaSurfaceObject_t handle, int x, int y, int z)
{
    EmulatedSurface* s = reinterpret_cast<EmulatedSurface*>(handle);
    if (x < 0 || x % (int)sizeof(T) != 0 || x + (long long)sizeof(T) > s->width || y < 0 || y >= s->height || z < 0
        || z >= s->depth) {
        ++s->bad;
        return;
    }
    memcpy(s->data + ((long long)z * s->height + y) * s->width + x, &value, sizeof(T));
}
template <typename T> void surf2Dwrite(T value, cudaSurfaceObject_t s, int x, int y)
{
    emulated_store(value, s, x, y, 0);
}
template <typename T> void surf3Dwrite(T value, cudaSurfaceObject_t s, int x, int y, int z)
{
    emulated_store(value, s, x, y, z);
}
"""


@pytest.fixture(scope="module")
def emulator():
    from latticelab.sim.gpu.emulate import compiler, emulated_xp

    if compiler() is None:
        pytest.skip("no C++ compiler (g++) for the CUDA emulator")
    return emulated_xp()


def _ising_inputs(shape, seed):
    rng = np.random.default_rng(seed)
    spins = np.where(rng.random(shape) < 0.5, 1, -1).astype(np.int8)
    return spins, rng.random(shape) < 0.3, rng.random(shape) < 0.15


def _scalar_inputs(shape, seed, low, high):
    """float32 values around [low, high], with every edge: NaN, +-inf, the range's ends, the code boundaries."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    span = high - low
    values = rng.uniform(low - 0.2 * span, high + 0.2 * span, n)
    boundaries = np.float32(low) + (np.arange(255) / 254.0) * np.float32(span)   # where floor() steps
    k = min(n // 2, len(boundaries))
    values[:k] = rng.choice(boundaries, k, replace=False)
    values[k:k + 8] = [np.nan, np.inf, -np.inf, low, high, np.nextafter(np.float32(high), np.float32(0)),
                       np.float32(low) - np.float32(1e-7), 1e30]
    values = rng.permutation(values).astype(np.float32).reshape(shape)
    return values, rng.random(shape) < 0.1


ISING_CASES = [((6, 8), None, None), ((6, 8), "flipped", None), ((5, 12), "flipped", "rewired"),
               ((4, 4, 8), None, "rewired"), ((3, 5, 7), "flipped", "rewired")]
SCALAR_RANGES = [(0.0, 1.0), (-2.5, 7.25), (0.1, 0.7), (-3.3, 1700.0), (1e-3, 1.1e-3)]


def _ising_arrays(shape, flipped, rewired, seed=1):
    spins, f, r = _ising_inputs(shape, seed)
    return spins, f if flipped else None, r if rewired else None


def test_cuda_cell_codes_equal_the_numpy_encoders(emulator):
    from latticelab.sim.gpu.kernels import kernel_source

    def run(encoder, arrays, scalars, wide):
        source = kernel_source(encoder.cuda_source)
        module = emulator.RawModule(code=CODES_PRELUDE + source + CODES_KERNEL,
                                    name_expressions=("codes_to_buffer<1>", "codes_to_buffer<4>"))
        n = int(np.prod(arrays[0].shape))
        out = np.full(n, 0xEE, np.uint8)
        args, _ = interop.kernel_arrays(np, arrays)
        units = n // wide
        module.get_function(f"codes_to_buffer<{wide}>")(
            ((units + 63) // 64,), (64,), (*args, np.float32(scalars[0]), np.float32(scalars[1]), out, np.int64(units)))
        return out.reshape(arrays[0].shape)

    assert "LATTICELAB_HAS_CELL_CODE4" in ising.ENCODER.cuda_source.read_text()
    for seed, (shape, flipped, rewired) in enumerate(ISING_CASES):
        arrays = _ising_arrays(shape, flipped, rewired, seed)
        expected = ising.encode_codes(np, *arrays)
        for wide in (1, 4) if expected.size % 4 == 0 else (1,):  # cell_code4: four cells a unit
            got = run(ising.ENCODER, arrays, (0.0, 0.0), wide)
            np.testing.assert_array_equal(got, expected, err_msg=f"Ising {shape} {flipped} {rewired} wide {wide}")

    assert "LATTICELAB_HAS_CELL_CODE4" not in SCALAR_ENCODER.cuda_source.read_text()
    for seed, (low, high) in enumerate(SCALAR_RANGES):
        values, mask = _scalar_inputs((24, 31), seed, low, high)
        for highlight in (None, mask):
            expected = encode_scalar(np, values, highlight, None, low, high)
            got = run(SCALAR_ENCODER, (values, highlight, None), (low, high), 1)
            bad = np.flatnonzero(got != expected)
            assert not len(bad), (f"range ({low}, {high}): values {values.ravel()[bad[:5]]} give codes "
                                  f"{got.ravel()[bad[:5]]} on the device, {expected.ravel()[bad[:5]]} in NumPy")
            assert {0, 253}.issubset(set(np.unique(expected))) and (highlight is None or (expected == 254).any())


def _emulated_surface_codes(emulator, picture, wide):
    """Run the composed one-pass kernel of ``picture``'s encoder (render/interop.py) into an emulated surface."""
    module = interop.encoder_module(emulator, picture.encoder, prelude=EMULATED_SURFACE)
    shape = tuple(picture.shape)
    depth, height, width = (1,) * (3 - len(shape)) + shape
    out = np.full(depth * height * width, 0xEE, np.uint8)
    surface = np.array([out.ctypes.data, width, height, depth, 0], np.int64)
    arrays, aligned = interop.kernel_arrays(emulator, picture.arrays)
    assert aligned
    interop.launch_encode(emulator, module, arrays, picture.scalars, int(surface.ctypes.data), len(shape),
                          (depth, height, width), wide)
    assert surface[4] == 0, f"{surface[4]} stores outside the surface or misaligned"
    return out.reshape(shape)


@pytest.mark.parametrize("wide", [4, 1])
def test_the_one_pass_surface_writer_stores_the_picture_codes(emulator, wide):
    for seed, (shape, flipped, rewired) in enumerate(ISING_CASES + [((7, 10), "flipped", "rewired")]):
        picture = ising.ising_picture(np, *_ising_arrays(shape, flipped, rewired, seed))
        got = _emulated_surface_codes(emulator, picture, wide)
        np.testing.assert_array_equal(got, picture.codes(), err_msg=f"Ising {shape} wide {wide}")
    for seed, shape in enumerate([(6, 8), (5, 9), (4, 4, 12), (3, 3, 5)]):
        values, mask = _scalar_inputs(shape, seed, -1.0, 3.0)
        for picture in (scalar_picture(np, values, -1.0, 3.0, highlight=mask),
                        scalar_picture(np, values.astype(np.float64), -1.0, 3.0)):
            got = _emulated_surface_codes(emulator, picture, wide)
            np.testing.assert_array_equal(got, picture.codes(), err_msg=f"scalar {shape} wide {wide}")


def test_kernel_arrays_are_generic_by_dtype():
    spins = np.ones((4, 6), np.int8)[:, ::2]            # not contiguous
    values = np.linspace(0, 1, 12).reshape(4, 3)        # float64
    mask = np.zeros((4, 3), bool)
    (a0, a1, a2), aligned = interop.kernel_arrays(np, (spins, values, mask))
    assert a0.dtype == np.int8 and a0.flags.c_contiguous
    assert a1.dtype == np.float32 and np.array_equal(a1, values.astype(np.float32))
    assert a2.dtype == np.uint8 and a2.flags.c_contiguous
    (_, _, null), _ = interop.kernel_arrays(np, (spins, mask, None))
    assert isinstance(null, np.uint64) and null == 0
    misaligned = np.zeros(13, np.int8)[1:].reshape(3, 4)
    assert interop.kernel_arrays(np, (misaligned, None, None))[1] is False


@pytest.mark.parametrize("shape", [(6, 8), (5, 7), (3, 4, 12), (2, 5, 3)])
def test_the_surface_copy_stores_the_array(emulator, shape):
    """copy_to_surface (codes computed beforehand, e.g. by an encoder without a CUDA twin) on the emulator."""
    texels = np.random.default_rng(sum(shape)).integers(0, 256, shape).astype(np.uint8)
    depth, height, width = (1,) * (3 - len(shape)) + shape
    out = np.full(texels.size, 0xEE, np.uint8)
    surface = np.array([out.ctypes.data, width, height, depth, 0], np.int64)
    wide = 4 if width % 4 == 0 else 1
    units = texels.size // wide
    kernel = interop.copy_module(emulator, EMULATED_SURFACE).get_function(f"copy_to_surface<{len(shape)}, {wide}>")
    kernel((units // 64 + 1,), (64,), (texels, np.uint64(surface.ctypes.data), np.int32(width), np.int32(height),
                                       np.int64(units)))
    assert surface[4] == 0
    np.testing.assert_array_equal(out.reshape(shape), texels)


class _FakeDeviceArray:
    """Stands in for a CuPy array where there is none: it has the CUDA array interface."""

    def __init__(self, host):
        self.host, self.shape, self.dtype, self.ndim = host, host.shape, host.dtype, host.ndim
        self.__cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str, "version": 3,
                                         "data": (0, False)}


def test_an_encoder_whose_cuda_source_does_not_compile_is_logged_once_and_left_to_two_passes(
        view, emulator, tmp_path, monkeypatch, caplog):
    import logging
    import types

    broken = tmp_path / "broken_codes.cuh"
    broken.write_text("__device__ unsigned char cell_code(long long i) { return undefined_name[i]; }\n")
    encoder = CellEncoder("broken-for-the-test", lambda xp, a0, a1, a2, f0, f1: a0, broken)
    codes = _FakeDeviceArray(np.zeros((8, 8), np.uint8))
    picture = Picture(np, (8, 8), encoder, (codes,), np.zeros((256, 4), np.float32))
    runtime = types.SimpleNamespace(cudaGraphicsRegisterFlags=types.SimpleNamespace(
        cudaGraphicsRegisterFlagsSurfaceLoadStore=2))
    monkeypatch.setattr(interop, "_cuda_modules", lambda: (emulator, runtime))
    monkeypatch.setattr(interop.CanvasInterop, "_probe", lambda self: (True, "forced on for the test"))
    monkeypatch.setattr(interop, "_uncompiled_encoders", set())
    caplog.set_level(logging.INFO, logger=interop.__name__)
    gpu = interop.interop_for(view.viewbox.canvas)
    for _ in range(3):
        assert gpu.try_picture(view.image.texture, picture) is False
    warnings = [r.getMessage() for r in caplog.records if "one-pass texture writes off" in r.getMessage()]
    assert len(warnings) == 1 and "broken-for-the-test" in warnings[0], warnings
    assert gpu.enabled and gpu.uploads == {"interop": 0, "host": 0}  # the canvas keeps interop for the others
    with pytest.raises(interop.InteropError, match="no CUDA source"):
        interop.encoder_source(CellEncoder("none", encoder.encode))
