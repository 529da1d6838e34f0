// A plot line: (step, value) pairs mapped by the plot's camera.
attribute vec2 a_position;
void main() {
    gl_Position = $transform(vec4(a_position, 0.0, 1.0));
}
