// Colour of one lattice site from its uint8 state code (render/upload.py: encode_state), read from an
// r8 texture as code / 255. Bit 0: spin up; bit 1: flipped in the last step; bit 2: touched by rewiring.
// GLSL 1.10 has no integer bit operations, so bits are tested with floor/mod.
uniform vec4 u_colour_down;
uniform vec4 u_colour_up;
uniform vec4 u_colour_down_flipped;   // highlight colour depends on the new spin (thesis figure 7.15)
uniform vec4 u_colour_up_flipped;
uniform vec4 u_colour_rewired;
uniform float u_show_flipped;
uniform float u_show_rewired;

float state_bit(float code, float bit_value) {
    return mod(floor(code / bit_value), 2.0);
}

vec4 state_colour(float texel) {
    float code = floor(texel * 255.0 + 0.5);
    float up = state_bit(code, 1.0);
    float flipped = state_bit(code, 2.0) * u_show_flipped;
    float rewired = state_bit(code, 4.0) * u_show_rewired;
    vec4 steady = mix(u_colour_down, u_colour_up, up);
    vec4 highlight = mix(u_colour_down_flipped, u_colour_up_flipped, up);
    return mix(mix(steady, highlight, flipped), u_colour_rewired, rewired);
}
