#!/usr/bin/env bash
# The JavaScript libraries circuit-tracer's graph viewer loads from the web (its index.html: d3 and Anthropic's
# jetpack from transformer-circuits.pub, dagre and pako from unpkg), from npm, for the offline browser test
# tests/browser/test_circuit_viewer.py: d3 7.9.2, d3-collection 1.0.7 (d3.nest, which jetpack's nestBy calls),
# d3-jetpack 2.3.0 (the public jetpack; the test adds the one method the viewer calls that it lacks,
# conventions().drawAxis), dagre 0.8.5, pako 2.1.0. Written to artifacts/viewer-js/ (gitignored).
#
#   bash .ci/install-viewer-js.sh      # no-op when the files are there; without npm it says so and exits 0
#                                      # (the test then skips, naming this script)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=artifacts/viewer-js
FILES=(d3.min.js d3-collection.min.js d3-jetpack.cjs dagre.min.js pako.min.js)
have_all() { for f in "${FILES[@]}"; do [ -f "$OUT/$f" ] || return 1; done; }
if have_all; then
    echo "install-viewer-js: $OUT already holds ${FILES[*]}"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "install-viewer-js: npm not found; the circuit viewer's browser test will skip" >&2
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent d3@7.9.2 d3-collection@1.0.7 d3-jetpack@2.3.0 dagre@0.8.5 pako@2.1.0 >/dev/null)
for pkg in d3-7.9.2 d3-collection-1.0.7 d3-jetpack-2.3.0 dagre-0.8.5 pako-2.1.0; do
    mkdir -p "$tmp/$pkg" && tar xzf "$tmp/$pkg.tgz" -C "$tmp/$pkg"
done
mkdir -p "$OUT"
cp "$tmp/d3-7.9.2/package/dist/d3.min.js" "$tmp/d3-collection-1.0.7/package/dist/d3-collection.min.js" \
   "$tmp/d3-jetpack-2.3.0/package/build/d3-jetpack.cjs" "$tmp/dagre-0.8.5/package/dist/dagre.min.js" \
   "$tmp/pako-2.1.0/package/dist/pako.min.js" "$OUT/"
echo "install-viewer-js: wrote ${FILES[*]} to $OUT"
