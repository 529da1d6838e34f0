// The 3D lattice as a solid block of cells: the six faces of a box whose top is lowered by u_peel
// layers, so peeling costs nothing but a uniform. World coordinates are cell coordinates (x, y, z).
attribute vec3 a_corner;   // corner of the unit cube
attribute vec3 a_normal;   // outward normal of the face this vertex belongs to
uniform vec3 u_size;       // cells along x, y, z
uniform float u_peel;      // layers removed from the top (z = L-1 downwards)
varying vec3 v_position;
varying vec3 v_normal;

void main() {
    vec3 extent = vec3(u_size.xy, u_size.z - u_peel);
    v_position = a_corner * extent;
    v_normal = a_normal;
    gl_Position = $transform(vec4(v_position, 1.0));
}
