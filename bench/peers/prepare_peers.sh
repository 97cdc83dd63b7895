#!/usr/bin/env bash
# Prepares the CPU peers that bench/peers/cpu_tools.py times (pfstools, oiiotool; luminance-hdr-cli on
# request) for the bare GPU host, as Debian 12 packages in ./.peerdeps (git-ignored), the way
# bench/device/prepare.sh carries the runtime libraries in ./.devdeps. Run it once from the project's
# root, after prepare.sh (it needs apt-get, cc, readelf and python3). Then, on the GPU host:
#   carry: [".devdeps", ".peerdeps", ...]
#   command: source .peerdeps/enter.sh && bench/peers/cpu_tools.py FRAME.exr --json $OUT/peers.json
# .peerdeps/enter.sh enters .devdeps first when that has not been done. (Chaining
# `source .devdeps/enter.sh && source .peerdeps/enter.sh` stops where the NVIDIA manifest that
# .devdeps/enter.sh tests for last is missing: that test is its exit status.)
#
#   bench/peers/prepare_peers.sh [--with-luminance]
#
# What is carried is the closure of the shared libraries that the binaries cpu_tools.py runs load (ldd
# of pfsinexr, pfstmo_reinhard02, pfsgamma, pfsoutimgmagick and ImageMagick's PNG coder; of oiiotool; of
# luminance-hdr-cli and Qt's offscreen platform plug-in), less what .devdeps carries (OpenEXR, Imath,
# libdeflate, libwebp*, libX11/xcb/Xau/Xdmcp, libbsd, libmd; the GL loaders, which it unpacks into /)
# and less what a stock Ubuntu 24.04 surely has with the same soname (libc, libstdc++, libgcc, zlib,
# bzip2, xz, zstd, lz4, pcre2-8, selinux, blkid/mount/uuid, ffi, gmp, gcrypt/gpg-error, com_err,
# systemd, cap, acl, attr, tinfo, tasn1, p11-kit, idn2, nettle/hogweed). bench/peers/check_peers.sh
# checks that claim in a chroot holding only those, and runs cpu_tools.py there.
#
# Two kinds of library are linked but never entered for what cpu_tools.py does, and are too big to
# carry: they are replaced by stand-ins generated here from the real libraries' symbol tables
# (make_stubs.py: same soname and symbol versions; a stand-in function that is ever called says so and
# exits 127, so a wrong guess fails the tool loudly rather than changing what it does):
#  - the codec libraries of Debian's libOpenImageIO other than EXR's and PNG's (FFmpeg, OpenCV, DCMTK,
#    OpenVDB, libheif): about 110 MB of packages with what they pull in, where oiiotool itself needs 8;
#  - ICU (9.2 MB), which ImageMagick's libxml2 links for character-set conversions (7 ucnv_ functions).
# pfsout writes the PNG through ImageMagick (pfsoutimgmagick), as a plain `apt-get install pfstools`
# does: that writer is most of pfstools' time at 4K (23 of 27 s here), so it is carried rather than
# swapped for netpbm's pnmtopng.
#
# Sizes (Debian 12 packages, 2026-11): 14.4 MiB in all, 34 packages and 15 stand-ins (0.2 MiB): pfstools
# alone about 8.1 MiB, oiiotool alone about 7.9 MiB, 1.3 MiB of it shared (lcms2, freetype, libpng,
# brotli, expat, libgomp). --with-luminance adds luminance-hdr-cli, about 33 MiB more (Qt 5 and the real
# ICU, exiv2 with its curl/TLS/Kerberos stack): 48 MiB, which does not fit in a carry beside the build
# folder (64 MiB for the whole working tree, tracked files, .devdeps and build included), only in one
# for a run of the peers alone.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
with_luminance=0
case "${1:-}" in
  --with-luminance) with_luminance=1 ;;
  "") ;;
  *) echo "usage: $0 [--with-luminance]" >&2; exit 2 ;;
esac
grep -qx '/.peerdeps/' .git/info/exclude 2>/dev/null || echo '/.peerdeps/' >> .git/info/exclude

# pfsin (bash) -> pfsinexr | pfstmo_reinhard02 | pfsgamma | pfsout (bash) -> pfsoutimgmagick, which loads
# ImageMagick's png coder module.
pfstools=(pfstools pfstmo libpfs2
          libmagick++-6.q16-8 libmagickcore-6.q16-6 libmagickwand-6.q16-6 imagemagick-6-common
          liblcms2-2 liblqr-1-0 libglib2.0-0 libfftw3-double3 libfontconfig1 libfreetype6 libpng16-16
          libbrotli1 libexpat1 libxext6 libxml2 libltdl7 libgomp1)
# ImageMagick links libxml2, which links ICU (9.2 MB) for the conversions of character sets it has no
# converter of its own for (ucnv_*: 7 functions), which neither reading a PFS stream nor writing a PNG
# reaches: a stand-in unless luminance-hdr-cli (Qt) comes too and needs the real one.
icu_stub="libicu72: libicuuc.so.72"
# oiiotool -> libOpenImageIO(+_Util): the libraries it needs for real (EXR, PNG, the plug-ins' small
# libraries, OpenColorIO which oiiotool sets up at start) ...
oiiotool=(openimageio-tools libopenimageio2.4
          libopencolorio2.1 libyaml-cpp0.7 libpystring0 libexpat1 libtbb12 libboost-thread1.74.0
          libfreetype6 libpng16-16 libbrotli1 libjpeg62-turbo libgif7 libopenjp2-7 libraw20 liblcms2-2
          libgomp1 libtiff6 liblerc4 libjbig0)
# ... and those it links but does not enter for EXR -> PNG: stand-ins are generated from them here
# (package: sonames), and the packages themselves stay behind.
stubbed=("libopencv-core406: libopencv_core.so.406" "libopencv-imgproc406: libopencv_imgproc.so.406"
         "libopencv-videoio406: libopencv_videoio.so.406"
         "libdcmtk17: libdcmimage.so.17 libdcmimgle.so.17 libdcmdata.so.17 liboflog.so.17 libofstd.so.17"
         "libavcodec59: libavcodec.so.59" "libavformat59: libavformat.so.59" "libavutil57: libavutil.so.57"
         "libswscale6: libswscale.so.6" "libheif1: libheif.so.1" "libopenvdb10.0: libopenvdb.so.10.0")
# luminance-hdr-cli -> Qt 5 (Core, Gui, Widgets, Concurrent; the offscreen platform plug-in), exiv2, ...
luminance=(luminance-hdr libqt5core5a libqt5gui5 libqt5widgets5 libqt5concurrent5
           libdouble-conversion3 libicu72 libpcre2-16-0 libmd4c0 libharfbuzz0b libgraphite2-3 libglib2.0-0
           libfreetype6 libfontconfig1 libpng16-16 libbrotli1 libexpat1
           libexiv2-27 libboost-program-options1.74.0 libfftw3-single3 libgsl27 libgslcblas0 libraw20
           liblcms2-2 libjpeg62-turbo libtiff6 liblerc4 libjbig0 libgomp1 libcfitsio10
           libcurl3-gnutls libnghttp2-14 libpsl5 librtmp1 libssh2-1 libssl3 libgssapi-krb5-2 libkrb5-3
           libk5crypto3 libkrb5support0 libkeyutils1 libldap-2.5-0 libsasl2-2 libgnutls30 libunistring2)
pkgs=("${pfstools[@]}" "${oiiotool[@]}")
if [ $with_luminance = 1 ]; then pkgs+=("${luminance[@]}"); fi
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)

[ -n "$(ls /var/lib/apt/lists/ 2>/dev/null | grep -v lock)" ] || apt-get update -q
rm -rf .peerdeps
mkdir -p .peerdeps/debs .peerdeps/stubs
for p in "${pkgs[@]}"; do  # one at a time, so that a missing name says which
  (cd .peerdeps/debs && apt-get download "$p" >/dev/null 2>&1) || { echo "prepare_peers: cannot download $p" >&2; exit 1; }
done

# The stand-ins: built from the real libraries' symbol tables (their packages are fetched into a scratch
# folder, not carried), for the symbols their consumers import.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in .peerdeps/debs/{libopenimageio2.4,openimageio-tools,libxml2}_*.deb; do dpkg -x "$f" "$work/root"; done
reals=()
add_reals() {  # "package: soname ...": the real files, unpacked under $work/root, appended to reals
  local pkg=${1%%:*} so
  (cd "$work" && apt-get download "$pkg" >/dev/null 2>&1) || { echo "prepare_peers: cannot download $pkg" >&2; exit 1; }
  dpkg -x "$work/${pkg}"_*.deb "$work/root"
  for so in ${1#*:}; do reals+=("$(readlink -e "$work/root/usr/lib/x86_64-linux-gnu/$so")"); done
}
lib="$work/root/usr/lib/x86_64-linux-gnu"
for entry in "${stubbed[@]}"; do add_reals "$entry"; done
# DCMTK's headers give every file that includes them a static DiRegister, built at load and destroyed at
# exit whatever is read: those two return instead of failing.
python3 bench/peers/make_stubs.py .peerdeps/stubs --noop _ZN10DiRegisterC1Ev --noop _ZN10DiRegisterD1Ev \
  --consumer "$lib/libOpenImageIO.so.2.4" --consumer "$lib/libOpenImageIO_Util.so.2.4" \
  --consumer "$work/root/usr/bin/oiiotool" "${reals[@]}" >/dev/null
if [ $with_luminance = 0 ]; then
  reals=(); add_reals "$icu_stub"
  python3 bench/peers/make_stubs.py .peerdeps/stubs --consumer "$(readlink -e "$lib/libxml2.so.2")" "${reals[@]}" >/dev/null
fi
strip --strip-unneeded .peerdeps/stubs/*.so*

cat > .peerdeps/enter.sh <<'ENTER'
# Sourced on the GPU host: enters .devdeps first when that has not been done (OpenEXR, Imath, libwebp,
# libX11 ... come from there), then unpacks the CPU peers (Debian 12 packages) into a private prefix and
# puts them first on PATH and LD_LIBRARY_PATH. Set PEERDEPS_PREFIX to unpack elsewhere than /tmp/peerdeps.
peerdeps_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case ":${LD_LIBRARY_PATH:-}:" in
  *:/tmp/devdeps/usr/lib/x86_64-linux-gnu:*) ;;
  *) if [ -f "$peerdeps_here/../.devdeps/enter.sh" ]; then source "$peerdeps_here/../.devdeps/enter.sh" || true;
     else echo "peerdeps: no .devdeps/enter.sh beside .peerdeps: OpenEXR, Imath, libwebp, libX11 ... must come from elsewhere" >&2; fi ;;
esac
peer=${PEERDEPS_PREFIX:-/tmp/peerdeps}
mkdir -p "$peer/stubs"
for f in "$peerdeps_here"/debs/*.deb; do dpkg -x "$f" "$peer"; done
cp "$peerdeps_here"/stubs/* "$peer/stubs/"
# pfsin and pfsout pick their readers and writers with `which` (without it pfsout would try netpbm).
command -v which >/dev/null 2>&1 || { printf '#!/bin/sh\nfor c; do command -v "$c" || exit 1; done\n' > "$peer/usr/bin/which"; chmod +x "$peer/usr/bin/which"; }
export PATH=$peer/usr/bin:$PATH
# usr/lib: libpfs.so.2 lives there. The stand-ins come last: each has a soname no carried package has.
export LD_LIBRARY_PATH=$peer/usr/lib/x86_64-linux-gnu:$peer/lib/x86_64-linux-gnu:$peer/usr/lib:$peer/stubs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# ImageMagick (pfsout's PNG writer) looks for its coder modules and configuration (policy.xml's limits
# included) under /usr and /etc unless told.
im=$(ls -d "$peer"/usr/lib/x86_64-linux-gnu/ImageMagick-6.* 2>/dev/null | head -1)
if [ -n "$im" ]; then
  export MAGICK_CODER_MODULE_PATH=$im/modules-Q16/coders MAGICK_CODER_FILTER_PATH=$im/modules-Q16/filters
  export MAGICK_CONFIGURE_PATH=$peer/etc/ImageMagick-6:$im/config-Q16:$peer/usr/share/ImageMagick-6
fi
# luminance-hdr-cli, when carried: Qt's plug-ins, with no display.
if [ -d "$peer/usr/lib/x86_64-linux-gnu/qt5/plugins" ]; then
  export QT_PLUGIN_PATH=$peer/usr/lib/x86_64-linux-gnu/qt5/plugins QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
fi
unset peerdeps_here im
true  # so that `source .peerdeps/enter.sh && ...` goes on
ENTER

echo "prepare_peers: .peerdeps holds $(du -sh .peerdeps | cut -f1) ($(ls .peerdeps/debs | wc -l) packages, $(ls .peerdeps/stubs | wc -l) stand-ins)"
