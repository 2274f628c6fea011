#!/usr/bin/env bash
# bundle.sh: build, on this machine (no GPU needed), what run.sh needs on
# the GPU machine, into bin/devicecheck (ignored by git, so it travels only
# when carried):
#
#	cuda.test   the CUDA backend's tests and decode benchmark (go test -c -tags cuda)
#	zerolayer   the zerolayer binary built with the cuda tag
#	shared/     stories260K.gguf and its reference.json
#
# It fetches cuda.h and the stub libcuda.so as make cuda-check does, and
# checks that the working tree plus the bundle stay under the device
# tool's 64 MiB. Then run on the device:
#
#	carry=["bin/devicecheck"], command="bash gpu/devicecheck/run.sh", timeout_s=420
set -euo pipefail
cd "$(dirname "$0")/../.."

GO=${GO:-go}
CACHE=${CUDA_CACHE:-$HOME/.cache/zerolayer/cuda}
SHARED=${SHARED:-../shared}
out=bin/devicecheck

gpu/cuda/cuda-headers.sh "$CACHE"
export CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations -I$CACHE/include"
export CGO_LDFLAGS="-L$CACHE/lib"

rm -rf "$out"
mkdir -p "$out"
$GO test -c -tags cuda -trimpath -ldflags='-s -w' -o "$out/cuda.test" ./gpu/cuda
$GO build -tags cuda -trimpath -ldflags='-s -w' -o "$out/zerolayer" ./cmd/zerolayer
if [ -f "$SHARED/models/stories260K/stories260K.gguf" ]; then
	mkdir -p "$out/shared/models/stories260K"
	cp "$SHARED/models/stories260K/stories260K.gguf" "$SHARED/models/stories260K/reference.json" \
		"$out/shared/models/stories260K/"
else
	echo "bundle.sh: $SHARED/models/stories260K not found; the reference test will skip" >&2
fi

# What the device tool sends: tracked files, untracked files git does not
# ignore, and the carried bundle.
# (Files deleted but still in the index are skipped.)
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }' || true)
bundle=$(du -sb "$out" | cut -f1)
total=$((tree + bundle))
printf 'bundle.sh: %s: %d MiB; with the working tree %d MiB (limit 64)\n' "$out" $((bundle >> 20)) $((total >> 20)) >&2
ls -l "$out" >&2
if [ "$total" -ge $((62 << 20)) ]; then
	echo "bundle.sh: too large to carry; remove untracked files from the working tree" >&2
	exit 1
fi
