// One texel per site; nearest sampling, colour from the state code.
uniform sampler2D u_state;
varying vec2 v_texcoord;

void main() {
    gl_FragColor = state_colour(texture2D(u_state, v_texcoord).r);
}
