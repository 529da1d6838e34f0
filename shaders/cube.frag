// Each fragment of a face shows the cell just inside that face; faces are shaded by orientation
// so the block reads as 3D.
uniform sampler3D u_codes;   // texel (x, y, z) = cell codes[z, y, x]
uniform vec3 u_size;
uniform float u_peel;
varying vec3 v_position;
varying vec3 v_normal;

void main() {
    vec3 top = vec3(u_size.xy, u_size.z - u_peel) - 1.0;
    vec3 cell = clamp(floor(v_position - 0.5 * v_normal), vec3(0.0), top);
    vec4 colour = cell_colour(texture3D(u_codes, (cell + 0.5) / u_size).r);
    float shade = dot(abs(v_normal), vec3(0.55, 0.78, 1.0));
    gl_FragColor = vec4(colour.rgb * shade, colour.a);
}
