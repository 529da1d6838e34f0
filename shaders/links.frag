// Lines take the colour as it is; points are drawn as rings so the cell underneath stays visible.
// Fragments above u_top (layers peeled off the 3D block) are not drawn.
uniform vec4 u_colour;
uniform float u_ring;       // 1.0 for end-point rings, 0.0 for lines
uniform float u_top;
varying float v_z;

void main() {
    if (v_z > u_top) discard;
    if (u_ring > 0.5) {
        float r = length(gl_PointCoord - vec2(0.5)) * 2.0;
        if (r > 1.0 || r < 0.55) discard;
    }
    gl_FragColor = u_colour;
}
