#!/usr/bin/env bash
# cuda-headers.sh DEST: put cuda.h and the stub libcuda.so of CUDA 11.8 in
# DEST/include and DEST/lib, for compiling the cuda build tag on a machine
# without CUDA (make cuda-check). Both come from Debian non-free's
# nvidia-cuda-dev package, fetched with apt-get download under a private apt
# configuration in DEST (the system's sources are not touched) and
# unpacked with dpkg-deb; the 774 MB package is deleted afterwards. cuda.h
# may not be redistributed: DEST must stay outside the repository.
#
# Needs a Debian 12 (bookworm) machine with network access to a Debian
# mirror. The mirror is the system's (from /etc/apt/sources.list.d/
# debian.sources), else $CUDA_DEB_MIRROR, else http://deb.debian.org/debian.
# Exits 0 at once when DEST already holds both files; exits 3 when the
# download fails.
set -euo pipefail

dest=${1:?usage: cuda-headers.sh DEST}
if [ -s "$dest/include/cuda.h" ] && [ -s "$dest/lib/libcuda.so" ]; then
	exit 0
fi

work="$dest/apt"
mkdir -p "$work/parts" "$work/lists/partial" "$work/cache/archives/partial" "$work/unpack"

mirror=${CUDA_DEB_MIRROR:-}
if [ -z "$mirror" ] && [ -r /etc/apt/sources.list.d/debian.sources ]; then
	mirror=$(awk '/^URIs:/ && $2 ~ /debian\/?$/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
fi
mirror=${mirror:-http://deb.debian.org/debian}
cat >"$work/parts/nonfree.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

apt_opts=(
	-o "Dir::Etc::SourceList=/dev/null"
	-o "Dir::Etc::SourceParts=$work/parts"
	-o "Dir::State::Lists=$work/lists"
	-o "Dir::Cache=$work/cache"
	-o "APT::Sandbox::User=root"
	-o "Acquire::Retries=3"
)

fail() {
	echo "cuda-headers.sh: $1" >&2
	echo "cuda-headers.sh: could not fetch nvidia-cuda-dev from Debian non-free ($mirror); check network access to the mirror, or set CUDA_DEB_MIRROR" >&2
	exit 3
}

echo "cuda-headers.sh: fetching cuda.h and the stub libcuda.so from nvidia-cuda-dev ($mirror, about 774 MB) into $dest" >&2
apt-get "${apt_opts[@]}" -qq update || fail "apt-get update failed"
(cd "$work" && apt-get "${apt_opts[@]}" -qq download nvidia-cuda-dev) || fail "apt-get download nvidia-cuda-dev failed"

deb=$(ls "$work"/nvidia-cuda-dev_*.deb)
dpkg-deb --fsys-tarfile "$deb" |
	tar -x -C "$work/unpack" ./usr/include/cuda.h ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so
mkdir -p "$dest/include" "$dest/lib"
cp "$work/unpack/usr/include/cuda.h" "$dest/include/cuda.h"
cp "$work/unpack/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" "$dest/lib/libcuda.so"
rm -rf "$work"
echo "cuda-headers.sh: $(basename "$deb"): $dest/include/cuda.h, $dest/lib/libcuda.so" >&2
