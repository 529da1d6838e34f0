// The unfolded 3D lattice: one quad covering the grid of z-layer tiles, in cell units.
attribute vec2 a_position;
uniform vec2 u_extent;     // grid size in cells, gaps included
varying vec2 v_position;

void main() {
    v_position = a_position * u_extent;
    gl_Position = $transform(vec4(v_position, 0.0, 1.0));
}
