"""3D FFT hyper-surfaces (thesis 003, figures 7.19-7.22): marching cubes of a magnitude volume at an iso
value, drawn inside a box labelled with its edge length in frequency units.

``SpectrumIsoView`` fills a VisPy ViewBox (no Qt). On a CUDA machine the volume stays a CuPy array, the
mesh is made by the GPU kernels of sim/marching_cubes.py and reaches the vertex buffers through
render/interop.py (device-to-device copies into the GL buffers); elsewhere scikit-image makes the mesh
and it is uploaded from host memory. Either way the mesh's (z, y, x) vertices go in unchanged: the vertex
shader (shaders/isosurface.vert) swizzles them.

On a software OpenGL renderer (Mesa's llvmpipe) a mesh is slow to draw: microseconds per face, more for large
faces (the surface of a noisy spectrum is many layers deep), and a noisy 128^3 spectrum at iso 0.5 gives half a
million faces (a draw of seconds, every time the dock repaints).
``display_mesh`` therefore keeps the mesh under a face budget when one is given: it meshes a block-maximum
reduction of the volume (2^3, 4^3, ... cells to one; the maximum keeps single bright modes, as the 2D image does),
never coarser than ``MIN_DISPLAY_SIDE`` cells a side, with the vertices put back in the full volume's
coordinates, so the box and its edge length still read in frequency units. The view says when it shows a
reduction (``factor``).

Even within that budget one draw of the mesh takes several frames' time there (nearly all of it the rasterizer's
threads on many tiny faces), longer than a frame may block. So a view given
``stage_faces`` draws a new mesh in slices into an offscreen picture of the canvas's size (``StagedPicture``: a
slice of faces a timer tick, each finished with glFinish, so its cost is paid there; at most ``stage_faces`` a
slice, fewer when a slice would take longer than ``STAGE_SLICE_S`` at the rate the last one was drawn) and shows
the picture, a single textured quad, once complete; until then the last complete picture stays. The picture is of one
camera: after the camera or the canvas size changed it is drawn again the same way (while the user turns the view, the
picture follows in steps of a few ticks rather than at every draw).
"""
from __future__ import annotations

import logging
import time

import numpy as np
from vispy import app as vispy_app
from vispy import gloo, scene
from vispy.gloo import gl
from vispy.scene.visuals import create_visual_node
from vispy.visuals import Visual

from latticelab.render.plots import paint_requests_held
from latticelab.render.shaders import load_shader
from latticelab.sim.analysis.marching_cubes import Mesh, marching_cubes

log = logging.getLogger(__name__)

SURFACE = (0.95, 0.78, 0.35, 1.0)
SURFACE_BACK = (0.45, 0.6, 0.95, 1.0)
BOX = (0.75, 0.75, 0.8, 1.0)
TEXT = (0.9, 0.9, 0.9, 1.0)


def _upload(buffer, array, canvas) -> str:
    """Into a gloo buffer: through CUDA-GL interop for CuPy data when the canvas allows it, else host."""
    if canvas is not None and not isinstance(array, np.ndarray):
        try:
            from latticelab.render.interop import interop_for
        except ImportError:
            pass
        else:
            return interop_for(canvas).upload_buffer(buffer, array)
    host = array if isinstance(array, np.ndarray) else array.get()
    buffer.set_data(np.ascontiguousarray(host))
    return "host"


class IsoSurfaceVisual(Visual):
    """A triangle mesh with per-vertex normals, two-sided headlight shading."""

    def __init__(self, colour=SURFACE, back_colour=SURFACE_BACK):
        super().__init__(vcode=load_shader("isosurface.vert"), fcode=load_shader("isosurface.frag"))
        self._positions = gloo.VertexBuffer(np.zeros((3, 3), np.float32))
        self._normals = gloo.VertexBuffer(np.zeros((3, 3), np.float32))
        self._faces = gloo.IndexBuffer(np.zeros((1, 3), np.uint32))
        self.shared_program["a_position"] = self._positions
        self.shared_program["a_normal"] = self._normals
        self.shared_program["u_colour"] = colour
        self.shared_program["u_back_colour"] = back_colour
        self._index_buffer = self._faces
        self._draw_mode = "triangles"
        self.n_faces = 0
        self.bounds_zyx = None  # ((lo, hi) per axis in array order) of the current mesh
        self.last_upload = None
        self.host_faces = None  # the faces on the host (NumPy meshes): what slices of faces are cut from
        self.on_screen = True   # False: drawn only into a staged picture (StagedPicture), never on the canvas
        self.set_gl_state("opaque", depth_test=True, cull_face=False)

    def set_mesh(self, mesh: Mesh, canvas=None) -> None:
        """Show ``mesh`` (NumPy or CuPy arrays); an empty mesh draws nothing."""
        self.n_faces = mesh.n_faces
        if self.n_faces:
            faces = mesh.faces.view("uint32")  # indices are non-negative: same bytes as int32
            self.host_faces = faces if isinstance(faces, np.ndarray) else None
            paths = {_upload(self._positions, mesh.vertices, canvas), _upload(self._normals, mesh.normals, canvas),
                     _upload(self._faces, faces, canvas)}
            self.last_upload = "/".join(sorted(paths))
            lo, hi = mesh.vertices.min(axis=0), mesh.vertices.max(axis=0)
            lo, hi = (a if isinstance(a, np.ndarray) else a.get() for a in (lo, hi))
            self.bounds_zyx = tuple(zip(lo.tolist(), hi.tolist()))
        else:
            self.bounds_zyx = None
            self.host_faces = None
        self.update()

    def draw_faces(self, index_buffer=None) -> None:
        """Draw (into whatever framebuffer is current) the faces of ``index_buffer`` (a slice of the mesh's), or
        all of them; also when the visual is not drawn on screen."""
        shown = self.on_screen
        self.on_screen = True
        if index_buffer is not None:
            self._index_buffer = index_buffer
        try:
            self.draw()
        finally:
            self._index_buffer = self._faces
            self.on_screen = shown

    def _prepare_transforms(self, view):
        tr = view.transforms
        vert = view.view_program.vert
        vert["transform"] = view.get_transform()
        vert["visual2scene"] = tr.get_transform("visual", "scene")
        vert["render2scene"] = tr.get_transform("render", "scene")

    def _prepare_draw(self, view):
        return self.n_faces > 0 and self.on_screen

    def _compute_bounds(self, axis, view):
        if self.bounds_zyx is None:
            return None
        return self.bounds_zyx[2 - axis]


IsoSurface = create_visual_node(IsoSurfaceVisual)


class PictureVisual(Visual):
    """A staged picture on screen: a texture of the canvas's framebuffer size, pixel for pixel, over the rectangle
    of its parent widget (a ViewBox; the picture holds the box's background too). Before the first picture it
    draws nothing."""

    VERTEX = """
    attribute vec2 a_position;
    void main() { gl_Position = $transform(vec4(a_position, 0.0, 1.0)); }
    """
    FRAGMENT = """
    uniform sampler2D u_picture;
    uniform vec2 u_size;
    void main() { gl_FragColor = texture2D(u_picture, gl_FragCoord.xy / u_size); }
    """

    def __init__(self):
        super().__init__(vcode=self.VERTEX, fcode=self.FRAGMENT)
        self._corners = gloo.VertexBuffer(np.zeros((4, 2), np.float32))
        self.shared_program["a_position"] = self._corners
        self._draw_mode = "triangle_strip"
        self._rect_size = None
        self.texture = None
        self.before_draw = None     # called at each on-screen draw, before the texture is looked at
        self.set_gl_state(None, depth_test=False, blend=False, cull_face=False)

    def set_texture(self, texture, size) -> None:
        """Show ``texture`` (a gloo Texture2D of ``size`` = (width, height) framebuffer pixels), or nothing (None)."""
        self.texture = texture
        if texture is not None:
            self.shared_program["u_picture"] = texture
            self.shared_program["u_size"] = tuple(float(v) for v in size)
        self.update()

    def _prepare_transforms(self, view):
        view.view_program.vert["transform"] = view.get_transform()

    def _prepare_draw(self, view):
        if self.before_draw is not None:
            self.before_draw()
        size = tuple(float(v) for v in getattr(self.parent, "size", (0, 0)))
        if size != self._rect_size:           # the parent widget's rectangle, in its own coordinates
            w, h = size
            self._corners.set_data(np.array([[0, 0], [w, 0], [0, h], [w, h]], np.float32))
            self._rect_size = size
        return self.texture is not None

    def _compute_bounds(self, axis, view):
        return None


Picture = create_visual_node(PictureVisual)


def _camera_key(node) -> bytes:
    """What the picture of ``node`` depends on besides its mesh: where its transforms put it in the framebuffer."""
    transform = node.transforms.get_transform("visual", "render").simplified
    matrix = getattr(transform, "matrix", None)
    if matrix is None:       # not a matrix chain: compare where a few points go
        matrix = transform.map(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32))
    return np.asarray(matrix, np.float64).tobytes()


class StagedPicture:
    """Draws an IsoSurface node's mesh into an offscreen picture of its canvas's size, ``faces`` faces a
    ``step``, and shows the finished picture in its place (a ``Picture`` node beside it). Two pictures: the one
    shown (front) and the one being drawn (back). The picture covers ``frame`` (the surface's ViewBox), its
    background included; ``extras``: nodes of the same scene drawn into the picture after
    the mesh, and no longer on screen (the box around the surface, whose hidden edges the surface's depths hide)."""

    def __init__(self, surface, faces: int, frame, extras=(), budget_s: float | None = None):
        self.surface = surface
        self.faces = int(faces)            # faces a slice at most
        # a slice's time: the faces of the next slice follow the rate of the last one (None: ``faces`` each)
        self.budget_s = budget_s
        self._per_slice = None             # faces of the next slice (None: ``faces``)
        self.extras = list(extras)
        self.background = tuple(frame.bgcolor.rgba)
        self.picture = Picture(parent=frame)
        self._buffers = [None, None]       # (framebuffer, colour texture, size) front and back
        self._front_key = None             # (mesh serial, camera key, size) of the front picture
        self._mesh_serial = 0
        self._host_faces = None            # the mesh's faces (host array) the slices are cut from, or None
        self._next = None                  # the first face of the next slice to draw into the back picture, or None
        self._back_key = None
        self.steps = 0                     # slices drawn (tests, benchmarks)
        self.restaged = 0                  # pictures drawn again for another camera or size
        self.on_pending = None             # called when slices are to be drawn again (the caller's timer)
        self.picture.order = 1                     # over the frame's scene, where nothing else is drawn
        self.picture.before_draw = self.before_draw
        surface.on_screen = False
        for node in self.extras:
            node.visible = False

    def release(self) -> None:
        """Back to drawing the surface and the extras on screen."""
        self.picture.parent = None
        self.surface.on_screen = True
        for node in self.extras:
            node.visible = True
        self.surface.update()

    # -- the mesh ---------------------------------------------------------------------------------
    def new_mesh(self) -> None:
        """The surface has a new mesh: start drawing it into the back picture (the front stays shown)."""
        self._mesh_serial += 1
        faces = self.surface.host_faces
        self._host_faces = faces[:self.surface.n_faces] if faces is not None and self.surface.n_faces else None
        self._next = 0
        self._back_key = None

    @property
    def pending(self) -> bool:
        return self._next is not None

    # -- drawing ----------------------------------------------------------------------------------
    def _canvas(self):
        return self.surface.canvas

    def _size(self, canvas) -> tuple[int, int]:
        return tuple(int(v) for v in canvas.physical_size)

    def _key(self, canvas) -> tuple:
        return (self._mesh_serial, _camera_key(self.surface), self._size(canvas))

    def _target(self, index: int, size):
        """Framebuffer ``index`` (0 front, 1 back) at ``size``, made or remade as needed."""
        held = self._buffers[index]
        if held is None or held[2] != size:
            colour = gloo.Texture2D(shape=(size[1], size[0], 4), format="rgba", interpolation="nearest")
            framebuffer = gloo.FrameBuffer(color=colour, depth=gloo.RenderBuffer((size[1], size[0]), "depth"))
            held = self._buffers[index] = (framebuffer, colour, size)
        return held

    def _draw_into(self, canvas, index: int, size, slices, clear: bool, extras: bool) -> None:
        framebuffer = self._target(index, size)[0]
        canvas.set_current()
        canvas.push_fbo(framebuffer, (0, 0), canvas.size)
        try:
            with paint_requests_held(canvas):     # no canvas update scheduled by what is done here
                if clear:
                    canvas.context.clear(color=self.background, depth=True)
                for index_buffer in slices:
                    self.surface.draw_faces(index_buffer)
                for node in self.extras if extras else ():
                    node.visible = True
                    try:
                        node.draw()
                    finally:
                        node.visible = False
                canvas.context.flush_commands()
                gl.glFinish()                 # the software rasterizer works now, not at the next on-screen draw
        finally:
            canvas.pop_fbo()
        canvas.context.flush_commands()

    def _show_front(self, key) -> None:
        framebuffer, colour, size = self._buffers[0]
        self._front_key = key
        self.picture.set_texture(colour, size)

    def step(self) -> bool:
        """Draw the next slice of the new mesh into the back picture; when it is complete it is shown. Returns
        whether slices are left."""
        canvas = self._canvas()
        if self._next is None or canvas is None:
            return False
        if not getattr(canvas.native, "isValid", lambda: True)():   # no GL context yet: try at the next tick
            return True
        key = self._key(canvas)
        if key != self._back_key:             # the camera or the size changed meanwhile: start again
            self._back_key, self._next = key, 0
        size = key[2]
        total = 0 if self._host_faces is None else len(self._host_faces)
        count = min(self._per_slice or self.faces, self.faces)
        chunk = [] if total == 0 else [gloo.IndexBuffer(np.ascontiguousarray(
            self._host_faces[self._next:self._next + count]))]
        last = self._next + count >= total
        start = time.perf_counter()
        self._draw_into(canvas, 1, size, chunk, clear=self._next == 0, extras=last)
        if self.budget_s is not None and chunk:
            rate = count / max(time.perf_counter() - start, 1e-4)        # faces a second, this slice
            self._per_slice = int(min(self.faces, max(MIN_STAGE_FACES, rate * self.budget_s)))
        self.steps += 1
        self._next += count
        if last:
            self._buffers.reverse()
            self._next = None
            self._show_front(key)
            return False
        return True

    def before_draw(self) -> None:
        """On screen, before the picture is drawn: a front picture of another camera or size (the user turned the
        view, the dock was resized, a new mesh moved the camera) is drawn again in slices; it stays shown
        meanwhile."""
        canvas = self._canvas()
        if canvas is None or self._front_key is None or self._next is not None:
            return
        if self._key(canvas)[1:] != self._front_key[1:]:
            self._next, self._back_key = 0, None
            self.restaged += 1
            if self.on_pending is not None:
                self.on_pending()


MIN_DISPLAY_SIDE = 32            # a face budget never reduces a volume below this many cells a side


def block_max(volume, factor: int):
    """``volume`` reduced by the maximum over blocks of factor^3 cells (trailing cells that do not fill a block
    are left out); NumPy or CuPy."""
    if factor <= 1:
        return volume
    n = [(k // factor) * factor for k in volume.shape]
    v = volume[:n[0], :n[1], :n[2]]
    return v.reshape(n[0] // factor, factor, n[1] // factor, factor, n[2] // factor, factor).max(axis=(1, 3, 5))


def estimated_faces(volume, level: float) -> int:
    """About how many faces marching cubes makes at ``level``: two per crossed grid edge (each crossed edge is
    one vertex; a closed triangle mesh has about twice as many faces as vertices). Cheap: three comparisons."""
    inside = volume > level
    crossed = sum(int((a != b).sum()) for a, b in ((inside[1:], inside[:-1]), (inside[:, 1:], inside[:, :-1]),
                                                   (inside[:, :, 1:], inside[:, :, :-1])))
    return 2 * crossed


def display_mesh(volume, level: float, method: str = "auto", max_faces: int | None = None) -> tuple[Mesh, int]:
    """(mesh, factor): the iso-surface of ``volume`` at ``level``, made from ``block_max(volume, factor)`` with the
    smallest factor (1, 2, 4, ...) whose mesh is estimated at no more than ``max_faces`` faces (None: factor 1),
    keeping at least MIN_DISPLAY_SIDE cells a side. Vertices are in the full volume's index coordinates (a block's
    centre for a reduced one)."""
    factor, reduced = 1, volume
    if max_faces is not None:
        while min(reduced.shape) >= 2 * MIN_DISPLAY_SIDE and estimated_faces(reduced, level) > max_faces:
            factor *= 2
            reduced = block_max(volume, factor)
    mesh = marching_cubes(reduced, level, method=method)
    if factor > 1 and mesh.n_faces:
        mesh = Mesh(mesh.vertices * np.float32(factor) + np.float32((factor - 1) / 2), mesh.faces, mesh.normals)
    return mesh, factor


def box_segments(lo, hi) -> np.ndarray:
    """(24, 3) end points of the 12 edges of the axis-aligned box [lo, hi] (x, y, z)."""
    lo, hi = np.asarray(lo, np.float32), np.asarray(hi, np.float32)
    corners = np.array([[(hi if (c >> a) & 1 else lo)[a] for a in range(3)] for c in range(8)], np.float32)
    pairs = [(c, c | (1 << a)) for c in range(8) for a in range(3) if not (c >> a) & 1]
    return corners[np.array(pairs).ravel()]


STAGE_INTERVAL_S = 0.01         # between two slices of a staged picture: the event loop runs in between
# a slice's time, kept well under a frame: beside a running model and spectrum worker a software renderer's
# slices vary several-fold, and a slice adds to the window's paint when both fall into one pass of the event loop
STAGE_SLICE_S = 0.006
MIN_STAGE_FACES = 200           # a slice draws at least this many faces (the picture is finished in time)


class SpectrumIsoView:
    """Iso-surfaces of a 3D magnitude volume in a ViewBox; the iso value is a fraction of the maximum.

    ``stage_faces``: draw each new mesh in slices of this many faces into a picture shown once complete (a
    software renderer; see the module's text), one slice per tick of a timer of the canvas's app."""

    def __init__(self, view: "scene.widgets.ViewBox", method: str = "auto", max_faces: int | None = None,
                 stage_faces: int | None = None):
        for _piece in self._made(view, method, max_faces, stage_faces):
            pass

    @classmethod
    def in_steps(cls, view: "scene.widgets.ViewBox", method: str = "auto", max_faces: int | None = None,
                 stage_faces: int | None = None):
        """The view made a piece per step (a generator yielding each piece's name, returning the view): each of
        its scene visuals takes most of a frame's time to make on the CPU, and all of them together in one pass of a
        window's event loop would be a visible gap. Until the last step the view is not complete: nothing may use it."""
        self = cls.__new__(cls)
        yield from self._made(view, method, max_faces, stage_faces)
        return self

    def _made(self, view, method, max_faces, stage_faces):
        self.view = view
        self.method = method
        self.max_faces = max_faces      # the face budget of ``display_mesh`` (None: the full volume's mesh)
        self.factor = 1                 # the reduction the mesh shown was made from
        self.volume = None
        self.iso = 0.5
        self.edge_length = None
        self.mesh = None
        self.timings = {}
        self.staged: StagedPicture | None = None
        self._stage_timer = None
        view.camera = scene.TurntableCamera(fov=35, elevation=25, azimuth=35)
        yield "camera"
        self.surface = IsoSurface(parent=view.scene)
        yield "surface"
        self.box = scene.visuals.Line(pos=np.zeros((2, 3), np.float32), color=BOX, connect="segments",
                                      parent=view.scene)
        yield "box"
        self.label = scene.visuals.Text("", color=TEXT, font_size=10, anchor_x="left", anchor_y="bottom",
                                        parent=view.scene)
        yield "label"
        self.set_staging(stage_faces)
        yield "staging"

    # -- staged drawing --------------------------------------------------------------------------
    def set_staging(self, faces: int | None) -> None:
        """Draw meshes in slices of ``faces`` faces (None: directly, at each draw of the canvas)."""
        if faces is None:
            if self.staged is not None:
                self._stop_staging()
                self.staged.release()
                self.staged = None
            return
        if self.staged is None:
            self.staged = StagedPicture(self.surface, faces, self.view, extras=[self.box], budget_s=STAGE_SLICE_S)
            self.staged.on_pending = self._run_stage_timer
            if self.mesh is not None:
                self._stage()
        self.staged.faces = int(faces)

    @property
    def staging(self) -> bool:
        """Whether a new mesh is still being drawn into its picture."""
        return self.staged is not None and self.staged.pending

    def _stage(self) -> None:
        self.staged.new_mesh()
        self._run_stage_timer()

    def _run_stage_timer(self) -> None:
        if self._stage_timer is None:
            self._stage_timer = vispy_app.Timer(STAGE_INTERVAL_S, connect=self._stage_tick,
                                                app=self.view.canvas.app if self.view.canvas else None)
        if not self._stage_timer.running:
            self._stage_timer.start()

    def _stage_tick(self, event=None) -> None:
        try:
            more = self.staged is not None and self.staged.step()
        except Exception:
            log.exception("staged iso-surface")   # drawn directly from now on
            more = False
            self.set_staging(None)
        if not more:
            self._stop_staging()
            self.view.update()

    def _stop_staging(self) -> None:
        if self._stage_timer is not None and self._stage_timer.running:
            self._stage_timer.stop()

    # -- data ------------------------------------------------------------------------------------
    def set_spectrum(self, magnitude) -> None:
        """A shifted 3D magnitude (NumPy or CuPy); scaled so its maximum is 1, so iso values are fractions."""
        if getattr(magnitude, "ndim", None) != 3:
            raise ValueError(f"magnitude must be a 3D array; got shape {getattr(magnitude, 'shape', None)}")
        xp = np if isinstance(magnitude, np.ndarray) else __import__("cupy")
        top = float(magnitude.max())
        self.volume = (magnitude / (top if top > 0 else 1.0)).astype(xp.float32)
        self._remesh()

    def set_iso(self, iso: float) -> None:
        iso = float(iso)
        if not 0.0 < iso < 1.0:
            raise ValueError(f"iso must lie strictly between 0 and 1 (a fraction of the largest magnitude); got {iso}")
        self.iso = iso
        self._remesh()

    # -- drawing ---------------------------------------------------------------------------------
    def _remesh(self) -> None:
        if self.volume is None:
            return
        t0 = time.perf_counter()
        mesh, factor = display_mesh(self.volume, self.iso, method=self.method, max_faces=self.max_faces)
        t1 = time.perf_counter()
        self.show_mesh(mesh, factor)
        self.timings = {"marching_cubes_s": t1 - t0, "upload_s": time.perf_counter() - t1}

    def show_mesh(self, mesh: Mesh, factor: int = 1) -> None:
        """Draw a mesh of the current volume (made here or elsewhere, e.g. by a benchmark or ``display_mesh`` on
        a worker; ``factor``: the block reduction it was made from)."""
        self.mesh = mesh
        self.factor = int(factor)
        self.surface.set_mesh(mesh, canvas=self.view.canvas)
        self._frame()
        if self.staged is not None:
            self._stage()

    def _frame(self) -> None:
        """Box and label around the surface, centred on frequency zero; the camera zooms to the box."""
        shape = self.volume.shape
        centre_zyx = np.array([n // 2 for n in shape], np.float32)
        if self.surface.bounds_zyx is None:
            half = 1.0
            self.edge_length = None
            self.label.text = "no surface at this iso value"
        else:
            b = np.array(self.surface.bounds_zyx, np.float32)            # (3, 2) in z, y, x
            half = float(np.max(np.abs(b - centre_zyx[:, None]))) or 1.0
            half = float(np.ceil(half))
            self.edge_length = 2 * half
            self.label.text = f"edge {self.edge_length:g} (frequency units, 1 = 1/L)"
            if self.factor > 1:
                self.label.text += f", shown at 1/{self.factor} resolution"
        centre = centre_zyx[::-1]
        lo, hi = centre - half, centre + half
        self.box.set_data(pos=box_segments(lo, hi))
        self.label.pos = np.array([[lo[0], lo[1], hi[2]]], np.float32)
        self.view.camera.set_range(x=(lo[0], hi[0]), y=(lo[1], hi[1]), z=(lo[2], hi[2]), margin=0.15)
        self.view.camera.center = tuple(float(c) for c in centre)


def make_show_hook(volume, size=(800, 800)):
    """A hook(mesh) for ``sim.bench_iso``: uploads the mesh into an iso view of ``volume`` on an
    off-screen canvas of the current VisPy app and renders one frame (read back, so it is finished)."""
    canvas = scene.SceneCanvas(size=size, show=False, bgcolor="black")
    iso_view = SpectrumIsoView(canvas.central_widget.add_view())
    iso_view.volume = volume

    def hook(mesh: Mesh) -> None:
        iso_view.show_mesh(mesh)
        canvas.render()

    hook.view, hook.canvas = iso_view, canvas
    hook.describe = lambda: (f"VisPy {canvas.app.backend_name} canvas {size[0]}x{size[1]}, render() with "
                             f"read-back; mesh upload path: {iso_view.surface.last_upload}")
    return hook
