#!/bin/sh
# fetch_blender_ocio.sh DEST: put Blender's OpenColorIO config (config.ocio, luts/, filmic/) in DEST.
#
# Why: the OCIO stage must handle configs whose views read real LUT files. Blender's config is that
# case: its Filmic view is a log2 shaper, a 65^3 3D LUT (filmic_desat65cube.spi3d) and a 4096-entry
# 1D LUT (filmic_to_0-70_1-03.spi1d), its looks are 1D LUTs (filmic_to_*.spi1d) and its Standard
# sRGB view a 65561-entry 1D LUT, so it exercises 3D and 1D textures in the generated shader. Debian's blender-data package carries it, but the package is about 31 MB, so it is
# fetched on demand instead of being committed; only datafiles/colormanagement/ is kept.
#
# Needs: apt-get (with bookworm's package lists already present: `apt-get update` needs root),
# dpkg-deb and tar. `apt-get download` itself needs no root; it writes into the current directory,
# so the download happens in a temporary directory that is removed afterwards. Run as root, apt
# warns that it downloads "unsandboxed as root" because its _apt user cannot write to that private
# directory; the warning is harmless.
# Idempotent: does nothing when DEST/config.ocio already exists.
set -eu

die() { echo "fetch_blender_ocio: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 DEST (the folder that will hold config.ocio)"
dest=$1

if [ -f "$dest/config.ocio" ]; then
    echo "fetch_blender_ocio: $dest/config.ocio already there, nothing to do"
    exit 0
fi

for tool in apt-get dpkg-deb tar; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (this script needs a Debian or Ubuntu host)"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/blender-ocio.XXXXXX") || die "cannot make a temporary directory"
trap 'rm -rf "$tmp"' EXIT INT TERM

(cd "$tmp" && apt-get download blender-data) ||
    die "apt-get download blender-data failed (no network, or run 'apt-get update' as root first?)"
deb=$(find "$tmp" -maxdepth 1 -name 'blender-data_*.deb' | head -n 1)
[ -n "$deb" ] || die "apt-get download left no blender-data_*.deb in $tmp"

# Unpack into a staging folder first so that a failed run leaves DEST without config.ocio
# (and the next run tries again) instead of half a config.
stage="$tmp/unpacked"
mkdir -p "$stage"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$stage" --wildcards '*/datafiles/colormanagement/*' ||
    die "could not unpack datafiles/colormanagement/ from $deb"
src=$(find "$stage" -type f -name config.ocio -path '*/datafiles/colormanagement/*' | head -n 1)
[ -n "$src" ] || die "$deb has no datafiles/colormanagement/config.ocio"
src=$(dirname "$src")

mkdir -p "$dest" || die "cannot create $dest"
# config.ocio is copied last so that its presence means the LUTs beside it are complete.
mv "$src/config.ocio" "$tmp/config.ocio"
cp -R "$src"/. "$dest"/ || die "cannot copy the LUTs into $dest"
cp "$tmp/config.ocio" "$dest/config.ocio" || die "cannot copy config.ocio into $dest"
echo "fetch_blender_ocio: Blender's OCIO config ($(basename "$deb")) is in $dest"
