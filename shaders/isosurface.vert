// Iso-surface mesh from marching cubes (sim/marching_cubes.py). Vertices and normals arrive in array
// order (z, y, x) straight from the simulation's buffers; the swizzle puts them in (x, y, z).
// Lighting is a two-sided headlight: the normal and the viewing ray through the vertex are both taken
// to scene coordinates, so it works for any camera.
attribute vec3 a_position;
attribute vec3 a_normal;
varying vec3 v_normal_scene;
varying vec3 v_ray_scene;

void main() {
    vec3 p = a_position.zyx;
    vec4 clip = $transform(vec4(p, 1.0));
    gl_Position = clip;
    vec4 s0 = $visual2scene(vec4(p, 1.0));
    vec4 s1 = $visual2scene(vec4(p + 0.01 * a_normal.zyx, 1.0));
    v_normal_scene = s1.xyz / s1.w - s0.xyz / s0.w;
    vec2 ndc = clip.xy / clip.w;
    vec4 near = $render2scene(vec4(ndc, -1.0, 1.0));
    vec4 far = $render2scene(vec4(ndc, 1.0, 1.0));
    v_ray_scene = far.xyz / far.w - near.xyz / near.w;
}
