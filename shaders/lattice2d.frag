// One texel per cell; nearest sampling, colour from the cell's code through the palette (palette.glsl).
uniform sampler2D u_codes;
varying vec2 v_texcoord;

void main() {
    gl_FragColor = cell_colour(texture2D(u_codes, v_texcoord).r);
}
