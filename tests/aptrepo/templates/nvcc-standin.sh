#!/bin/sh
# STAND-IN for NVIDIA's nvcc @@release@@ (V@@nvcc_version@@), from tests/aptrepo (test packages only).
# It is not a compiler. It prints the real release's `nvcc --version` banner, knows the GPU
# architectures that release accepts, checks its arguments the way a compile or a link would
# (a known -arch, readable inputs, a writable output), and writes a small marker file where
# nvcc would write an object or an executable. Anything it does not understand it ignores.
set -eu

release="@@release@@"
gpu_codes="@@gpu_codes@@"
arch_suffixes="@@arch_suffixes@@"
default_arch="@@default_arch@@"

fatal() {
    printf 'nvcc fatal   : %s\n' "$*" >&2
    exit 1
}

banner() {
    cat <<'EOF'
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on @@built_on@@
Cuda compilation tools, release @@release@@, V@@nvcc_version@@
Build @@build@@
EOF
}

# sm_120, sm_120a, compute_120 ... for every code this release knows.
known_arch() {
    for code in $gpu_codes; do
        number="${code#sm_}"
        for candidate in "sm_$number" "compute_$number"; do
            [ "$1" = "$candidate" ] && return 0
            for suffix in $arch_suffixes; do
                [ "$1" = "$candidate$suffix" ] && return 0
            done
        done
    done
    return 1
}

arch=""
output=""
compile_only=0
inputs=""
while [ "$#" -gt 0 ]; do
    case "$1" in
        --version | -V) banner; exit 0 ;;
        --list-gpu-code | -code-ls) printf '%s\n' $gpu_codes; exit 0 ;;
        --list-gpu-arch | -arch-ls) for code in $gpu_codes; do echo "compute_${code#sm_}"; done; exit 0 ;;
        -arch=* | --gpu-architecture=*) arch="${1#*=}" ;;
        -arch | --gpu-architecture) shift; arch="${1:-}" ;;
        -o | --output-file) shift; output="${1:-}" ;;
        -o*) output="${1#-o}" ;;
        -c | --compile) compile_only=1 ;;
        -*) ;;
        *) inputs="$inputs $1" ;;
    esac
    shift
done

[ -n "$arch" ] || arch="$default_arch"
known_arch "$arch" || fatal "Unsupported gpu architecture '$arch'"
[ -n "${inputs# }" ] || fatal "No input files specified; use option --help for more information"
for input in $inputs; do
    [ -r "$input" ] || fatal "Could not open input file '$input'"
done

if [ "$compile_only" -eq 1 ]; then
    set -- $inputs
    [ "$#" -eq 1 ] || [ -z "$output" ] || fatal "A single input file is required for a non-link phase when an outputfile is specified"
    [ -n "$output" ] || output="$(basename "${1%.*}").o"
    printf 'stand-in object: nvcc %s compiled %s for %s\n' "$release" "$1" "$arch" >"$output" \
        || fatal "Could not open output file '$output'"
    exit 0
fi

# Linking: every object must come from this stand-in, for the same architecture.
for input in $inputs; do
    case "$input" in
        *.cu) ;;
        *) grep -q "^stand-in object: nvcc $release compiled .* for $arch\$" "$input" \
            || fatal "'$input' is not an object for $arch from nvcc $release" ;;
    esac
done
[ -n "$output" ] || output="a.out"
{
    echo '#!/bin/sh'
    echo "echo 'stand-in executable: nvcc $release linked for $arch:$inputs'"
} >"$output" || fatal "Could not open output file '$output'"
chmod 755 "$output"
