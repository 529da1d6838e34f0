// Two-sided headlight shading of the iso-surface: ambient plus diffuse from the viewer's direction.
uniform vec4 u_colour;
uniform vec4 u_back_colour;
varying vec3 v_normal_scene;
varying vec3 v_ray_scene;

void main() {
    vec3 n = normalize(v_normal_scene);
    vec3 r = normalize(v_ray_scene);
    float facing = dot(n, -r);                  // > 0: the side the normal points to (lower values)
    vec4 base = facing >= 0.0 ? u_colour : u_back_colour;
    float diffuse = abs(facing);
    gl_FragColor = vec4(base.rgb * (0.25 + 0.75 * diffuse), base.a);
}
