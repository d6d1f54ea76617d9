#!/bin/bash -eu
# Builds the cargo-fuzz targets for ClusterFuzzLite (or OSS-Fuzz) and puts in
# $OUT, for every target <t> in fuzz/fuzz_targets/:
#
#   <t>                  the libFuzzer binary (cargo fuzz build -O)
#   <t>_seed_corpus.zip  the committed seeds: corpus/<t>/ and
#                        corpus/regressions/<t>/ (README files left out)
#   <t>.dict             the dictionary named in fuzz/options/<t>.options
#   <t>.options          the rest of fuzz/options/<t>.options (max_len,
#                        rss_limit_mb, malloc_limit_mb)
#
# In the builder image SRC, OUT, SANITIZER, FUZZING_ENGINE and
# CARGO_BUILD_TARGET are set and the checkout is $SRC/mcp-framer (see
# Dockerfile). The script also runs outside a container, with nightly and
# cargo-fuzz installed (scripts/test-cflite-build does this in CI):
#
#   SRC=/tmp/src OUT=/tmp/out MCP_FRAMER_DIR=$PWD RUSTUP_TOOLCHAIN=nightly \
#       .clusterfuzzlite/build.sh
#
#   MCP_FRAMER_DIR      the checkout (default: $SRC/mcp-framer)
#   SANITIZER           address (default), coverage (the image's cargo wrapper
#                       turns `cargo fuzz build` into a coverage build), none
#   FUZZING_ENGINE      libfuzzer (default; the only engine cargo-fuzz builds for)
#   CARGO_BUILD_TARGET  target triple (default: the host's)
set -euo pipefail

: "${SRC:?SRC must be set}"
: "${OUT:?OUT must be set}"
repo="${MCP_FRAMER_DIR:-$SRC/mcp-framer}"
sanitizer="${SANITIZER:-address}"
engine="${FUZZING_ENGINE:-libfuzzer}"

if [ "$engine" != libfuzzer ]; then
    echo "build.sh: FUZZING_ENGINE=$engine is not supported; cargo-fuzz builds for libfuzzer" >&2
    exit 1
fi
case "$sanitizer" in
    address | memory | thread | leak) sanitizer_flags=(--sanitizer "$sanitizer") ;;
    coverage) sanitizer_flags=() ;;
    *) sanitizer_flags=(--sanitizer none) ;;
esac

cd "$repo/fuzz"
mkdir -p "$OUT"

# The targets are the files in fuzz_targets/ (each is a [[bin]] of the same
# name). Not `cargo fuzz list`: the builder image's cargo wrapper turns every
# `cargo fuzz` command into a build when SANITIZER=coverage.
targets=()
for file in fuzz_targets/*.rs; do
    name="$(basename "$file" .rs)"
    targets+=("$name")
done
[ ${#targets[@]} -gt 0 ] || {
    echo "build.sh: no targets in $repo/fuzz/fuzz_targets" >&2
    exit 1
}

# -O is cargo-fuzz's default (release); debug assertions stay on, as in
# scripts/fuzz, so both builds share fuzz/target. The first word after
# `cargo` must be `fuzz` for the image's coverage wrapper to see it.
cargo fuzz build -O --debug-assertions "${sanitizer_flags[@]}"

triple="${CARGO_BUILD_TARGET:-$(rustc -vV | sed -n 's/^host: //p')}"
target_dir="$(cargo metadata --format-version 1 --no-deps | sed -E 's/.*"target_directory":"([^"]*)".*/\1/')"
bin_dir="$target_dir/$triple/release"

# Writes <zip> holding the files given (flat); zip(1) if present, else python3.
pack() {
    local zipfile="$1"
    shift
    rm -f "$zipfile"
    if command -v zip >/dev/null 2>&1; then
        zip -q -j "$zipfile" "$@"
    else
        python3 - "$zipfile" "$@" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for path in sys.argv[2:]:
        z.write(path, os.path.basename(path))
PY
    fi
}

for target in "${targets[@]}"; do
    dict=""
    install -m 755 "$bin_dir/$target" "$OUT/$target"

    seeds=()
    for dir in "$repo/corpus/$target" "$repo/corpus/regressions/$target"; do
        [ -d "$dir" ] || continue
        while IFS= read -r file; do
            seeds+=("$file")
        done < <(find "$dir" -maxdepth 1 -type f ! -name 'README*' | sort)
    done
    if [ ${#seeds[@]} -gt 0 ]; then
        duplicate="$(for f in "${seeds[@]}"; do basename "$f"; done | sort | uniq -d | head -n 1)"
        if [ -n "$duplicate" ]; then
            echo "build.sh: seed name $duplicate is in both corpus/$target and corpus/regressions/$target" >&2
            exit 1
        fi
        pack "$OUT/${target}_seed_corpus.zip" "${seeds[@]}"
    fi

    options="$repo/fuzz/options/$target.options"
    rm -f "$OUT/$target.dict" "$OUT/$target.options"
    if [ -f "$options" ]; then
        dict="$(sed -n -E 's/^[[:space:]]*dict[[:space:]]*=[[:space:]]*([^[:space:]]+)[[:space:]]*$/\1/p' "$options")"
        if [ -n "$dict" ]; then
            cp "$repo/fuzz/$dict" "$OUT/$target.dict"
        fi
        # ClusterFuzzLite finds <t>.dict by name; the rest is passed as is.
        grep -v -E '^[[:space:]]*dict[[:space:]]*=' "$options" >"$OUT/$target.options"
    fi
    echo "build.sh: $target -> $OUT/$target (${#seeds[@]} seeds${dict:+, dict $dict})"
done
