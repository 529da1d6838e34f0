// Colour of one cell from its byte code (sim/picture.py: a Picture's codes), read from an r8 texture as
// code / 255, looked up in the picture's 256-entry RGBA palette (a 256 x 1 texture, nearest filtering) at the
// code's texel centre. Any model's codes go through this one function: Ising states and scalar colormaps alike.
uniform sampler2D u_palette;

vec4 cell_colour(float texel) {
    float code = floor(texel * 255.0 + 0.5);
    return texture2D(u_palette, vec2((code + 0.5) / 256.0, 0.5));
}
