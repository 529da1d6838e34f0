// The 2D lattice as one textured quad: a_position runs over the unit square, the quad spans
// u_size cells, so world coordinates are cell coordinates (x = column, y = row).
attribute vec2 a_position;
uniform vec2 u_size;
varying vec2 v_texcoord;

void main() {
    v_texcoord = a_position;
    gl_Position = $transform(vec4(a_position * u_size, 0.0, 1.0));
}
