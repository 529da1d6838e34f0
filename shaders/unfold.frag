// The z-layers of the 3D texture laid out as a grid of tiles in zigzag (boustrophedon) order
// (thesis figure 7.13): row r holds layers r*columns .. r*columns+columns-1, left to right on even
// rows and right to left on odd rows. Must match render/unfold.py.
uniform sampler3D u_codes;
uniform float u_L;
uniform float u_gap;        // empty cells between tiles
uniform float u_columns;
varying vec2 v_position;

void main() {
    float pitch = u_L + u_gap;
    vec2 tile = floor(v_position / pitch);
    vec2 within = v_position - tile * pitch;
    if (within.x >= u_L || within.y >= u_L) discard;
    float column = mod(tile.y, 2.0) < 0.5 ? tile.x : u_columns - 1.0 - tile.x;
    float z = tile.y * u_columns + column;
    if (z >= u_L || column < 0.0) discard;
    vec3 texcoord = vec3(floor(within) + 0.5, z + 0.5) / u_L;
    gl_FragColor = cell_colour(texture3D(u_codes, texcoord).r);
}
