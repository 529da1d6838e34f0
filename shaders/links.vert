// Links between cells (GL_LINES) and their end points (GL_POINTS), positions in cell units.
attribute vec3 a_position;
uniform float u_point_size;
varying float v_z;

void main() {
    v_z = a_position.z;
    gl_Position = $transform(vec4(a_position, 1.0));
    gl_PointSize = u_point_size;
}
