# Shared by .ci/setup and .ci/test: sourced, not run.
#
# Environment knobs (all optional):
#   PYTHON=/path/to/python3.x     interpreter (>= 3.11) for the virtual environment; default: first of
#                                 python3, python3.13, python3.12, python3.11 that is new enough
#   LATTICELAB_VENV=dir           virtual environment location; default: <repo>/.venv
#   LATTICELAB_EXTRAS=a,b         pip extras to install; default: none for the app, `test,docs` for the tests,
#                                 plus `cuda` (or `cuda13`) when nvidia-smi sees a GPU
#   LATTICELAB_SKIP_DEBS=1        do not check or install Debian packages (you provide the libraries)

LATTICELAB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LATTICELAB_VENV="${LATTICELAB_VENV:-$LATTICELAB_ROOT/.venv}"

# Debian packages that Qt's xcb platform plugin (PySide6 wheels) and VisPy's OpenGL need at run time.
# libgl1-mesa-dri provides Mesa's llvmpipe, the software OpenGL used where there is no GPU (CI, Xvfb).
# To add one: append it here, then check with a fresh clone (docs/architecture.md: "Dependencies").
QT_RUNTIME_DEBS=(
    libegl1 libgl1 libgl1-mesa-dri libglib2.0-0 libfontconfig1 libdbus-1-3
    libxkbcommon0 libxkbcommon-x11-0 libx11-xcb1
    libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0
    libxcb-shape0 libxcb-xinerama0 libxcb-xkb1
)
# Extra packages for the test suite: a virtual X server for the GUI tests, and a C++ compiler with which
# tests/test_marching_cubes.py runs the CUDA kernels' logic on the host (those tests skip without one).
TEST_DEBS=(xvfb xauth g++)

say() { printf '[latticelab] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# Run a command as root: directly when root, else through sudo (without a password prompt when there
# is no terminal). Returns 1 when neither is possible.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo -n "$@"
    elif command -v sudo >/dev/null 2>&1 && [ -t 0 ]; then
        say "sudo is needed to install system packages"
        sudo "$@"
    else
        return 1
    fi
}

can_be_root() {
    [ "$(id -u)" -eq 0 ] && return 0
    command -v sudo >/dev/null 2>&1 || return 1
    sudo -n true 2>/dev/null || [ -t 0 ]
}

deb_installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = "installed" ]
}

# Print the names of the given Debian packages that are not installed. A library renamed by the 64-bit
# time_t transition (Debian 13, Ubuntu 24.04: libglib2.0-0 -> libglib2.0-0t64) counts under its new name;
# apt-get resolves the old name to the new one when installing.
missing_debs() {
    local pkg
    for pkg in "$@"; do
        deb_installed "$pkg" || deb_installed "${pkg}t64" || printf '%s\n' "$pkg"
    done
}

# Install the given Debian packages if any is missing (apt-get update only then, so re-runs are fast).
ensure_debs() {
    [ "${LATTICELAB_SKIP_DEBS:-0}" = 1 ] && return 0
    if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
        say "warning: no dpkg/apt-get here; make sure the equivalents of these Debian packages are installed:"
        say "  $*"
        return 0
    fi
    local missing
    mapfile -t missing < <(missing_debs "$@")
    [ "${#missing[@]}" -eq 0 ] && return 0
    if ! can_be_root; then
        say "missing Debian packages: ${missing[*]}"
        say "this user is not root and cannot use sudo; ask an administrator to run:"
        say "  apt-get install --no-install-recommends ${missing[*]}"
        say "(or set LATTICELAB_SKIP_DEBS=1 if you provide these libraries another way)"
        exit 1
    fi
    say "installing Debian packages: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null >&2 \
        || die "apt-get update failed"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
        </dev/null >&2 || die "apt-get install ${missing[*]} failed"
}

# Echo a python interpreter >= 3.11.
find_python() {
    local candidate
    for candidate in ${PYTHON:-} python3 python3.13 python3.12 python3.11; do
        if command -v "$candidate" >/dev/null 2>&1 \
            && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    die "Python >= 3.11 not found (tried ${PYTHON:-} python3 python3.13 python3.12 python3.11); install it or set PYTHON=/path/to/python3.x"
}

# Echo the Debian package that lets the chosen Python create virtual environments, if it cannot yet
# (Debian/Ubuntu ship venv's pip bootstrap, ensurepip, separately as python3.X-venv).
python_venv_debs() {
    local python
    python="$(find_python)"
    if ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
        "$python" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}-venv")'
    fi
}

# Default pip extras: add the CUDA extra when an NVIDIA GPU is visible.
default_extras() {
    local extras="$1" cuda_major
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        cuda_major="$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' | head -n1)"
        if [ "${cuda_major:-0}" -ge 13 ]; then extras="${extras:+$extras,}cuda13"; else extras="${extras:+$extras,}cuda"; fi
    fi
    printf '%s' "$extras"
}

# Create (or reuse) the virtual environment and pip install the project in editable mode with extras.
ensure_venv() {
    local extras="$1" python venv_python stamp want
    python="$(find_python)"
    venv_python="$LATTICELAB_VENV/bin/python"

    if [ -x "$venv_python" ] && ! "$venv_python" -c 'import sys, pip; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
        say "removing the broken or outdated virtual environment $LATTICELAB_VENV"
        rm -rf "$LATTICELAB_VENV"
    fi
    if [ ! -x "$venv_python" ]; then
        "$python" -c 'import ensurepip, venv' >/dev/null 2>&1 \
            || die "$python cannot create virtual environments (Debian/Ubuntu: install $(python_venv_debs))"
        say "creating the virtual environment $LATTICELAB_VENV with $python ($("$python" --version 2>&1))"
        rm -rf "$LATTICELAB_VENV"
        "$python" -m venv "$LATTICELAB_VENV" || die "could not create $LATTICELAB_VENV"
    fi

    # Skip pip when pyproject.toml is unchanged since the last successful install and that install
    # included every requested extra. The stamp holds: checksum of pyproject.toml + location, then extras.
    stamp="$LATTICELAB_VENV/.latticelab-installed"
    want="$( (cat "$LATTICELAB_ROOT/pyproject.toml"; printf 'root=%s\n' "$LATTICELAB_ROOT") | cksum)"
    local have_sum="" have_extras="" extra all_there=1
    if [ -f "$stamp" ]; then
        have_sum="$(sed -n 1p "$stamp")"
        have_extras="$(sed -n 2p "$stamp")"
    fi
    [ "$have_sum" = "$want" ] || have_extras=""
    for extra in ${extras//,/ }; do
        [[ ",$have_extras," == *",$extra,"* ]] || all_there=0
    done
    if [ "$have_sum" = "$want" ] && [ "$all_there" = 1 ] && [ -x "$LATTICELAB_VENV/bin/latticelab" ]; then
        say "virtual environment up to date ($LATTICELAB_VENV${have_extras:+, extras $have_extras})"
        return 0
    fi
    # Keep the extras installed before (same pyproject.toml) so alternating setup/test does not reinstall.
    for extra in ${have_extras//,/ }; do
        [[ ",$extras," == *",$extra,"* ]] || extras="${extras:+$extras,}$extra"
    done
    say "installing latticelab${extras:+[$extras]} into $LATTICELAB_VENV (first run downloads the dependencies)"
    rm -f "$stamp"
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "$venv_python" -m pip install --progress-bar off \
        -e "$LATTICELAB_ROOT${extras:+[$extras]}" >&2 || die "pip install failed"
    printf '%s\n%s\n' "$want" "$extras" >"$stamp"
}
