#!/usr/bin/env bash
# Checks .peerdeps (prepare_peers.sh) without the GPU host, as root on a Debian 12 machine with apt.
# It builds a chroot holding only the libraries a stock Ubuntu 24.04 surely has (their Debian 12
# packages: libc, libstdc++, libgcc, zlib, bzip2, xz, zstd, lz4, pcre2-8, selinux, blkid/mount/uuid,
# ffi, gmp, gcrypt/gpg-error, com_err, systemd, cap, acl, attr, tinfo, ...), the commands a shell
# script needs (bash, dash, coreutils, which, grep, sed, dpkg, tar) and a Python kept aside (its
# libexpat where only Python sees it), so that nothing of this machine's /usr/lib can be picked up.
# Inside it, as on the host, it enters .devdeps and .peerdeps, runs ldd on every binary and module
# cpu_tools.py makes run, says where each library came from (failing on any not found), and runs
# cpu_tools.py on FRAME.
#
#   bench/peers/check_peers.sh FRAME.exr [cpu_tools.py options]     (results: $PEERCHECK_DIR/peers.json)
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
[ $# -ge 1 ] || { echo "usage: $0 FRAME.exr [cpu_tools.py options]" >&2; exit 2; }
frame=$(readlink -f "$1"); shift
work=${PEERCHECK_DIR:-/tmp/peercheck}
stock=(libc6 libc-bin libstdc++6 libgcc-s1 zlib1g libbz2-1.0 liblzma5 libzstd1 liblz4-1 libpcre2-8-0
       libselinux1 libblkid1 libmount1 libuuid1 libffi8 libgmp10 libgcrypt20 libgpg-error0 libcom-err2
       libtasn1-6 libp11-kit0 libidn2-0 libnettle8 libhogweed6 libmd0 libsystemd0 libcap2 libcrypt1 libacl1
       libattr1 libtinfo6 libseccomp2 libxxhash0
       bash dash coreutils debianutils grep sed dpkg tar findutils)
python=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib)
pylibs=(libexpat1)
mkdir -p "$work/debs/stock" "$work/debs/python" "$work/debs/pylibs"
for group in stock python pylibs; do
  declare -n list=$group
  for p in "${list[@]}"; do
    ls "$work/debs/$group/${p}"_*.deb >/dev/null 2>&1 || (cd "$work/debs/$group" && apt-get download "$p" >/dev/null 2>&1) \
      || { echo "check_peers: cannot download $p" >&2; exit 1; }
  done
done

r=$work/root
cleanup() { for m in proj proc dev/null dev/zero dev/urandom; do mountpoint -q "$r/$m" && umount "$r/$m"; done; return 0; }
trap cleanup EXIT
cleanup
rm -rf "$r"
mkdir -p "$r/usr/bin" "$r/usr/sbin" "$r/usr/lib" "$r/usr/lib64" "$r/tmp" "$r/proc" "$r/dev" "$r/proj" "$r/opt/pylib" "$r/etc"
ln -s usr/bin "$r/bin"; ln -s usr/sbin "$r/sbin"; ln -s usr/lib "$r/lib"; ln -s usr/lib64 "$r/lib64"  # merged /usr
x() { dpkg-deb --fsys-tarfile "$1" | tar -x --keep-directory-symlink -C "$2"; }
for f in "$work"/debs/stock/*.deb "$work"/debs/python/*.deb; do x "$f" "$r"; done
mkdir -p "$work/pyx"; for f in "$work"/debs/pylibs/*.deb; do x "$f" "$work/pyx"; done
cp -a "$work"/pyx/{usr/,}lib/x86_64-linux-gnu/lib*.so* "$r/opt/pylib/" 2>/dev/null || true
cat > "$r/usr/bin/python3" <<'PY'
#!/bin/sh
exec /lib64/ld-linux-x86-64.so.2 --library-path /opt/pylib:/lib/x86_64-linux-gnu /usr/bin/python3.11 "$@"
PY
chmod +x "$r/usr/bin/python3"
ln -sf dash "$r/usr/bin/sh"
ln -sf which.debianutils "$r/usr/bin/which"  # as debianutils' postinst (update-alternatives) leaves it
echo "root:x:0:0:root:/root:/bin/bash" > "$r/etc/passwd"
chroot "$r" /sbin/ldconfig
for d in null zero urandom; do touch "$r/dev/$d"; mount --bind "/dev/$d" "$r/dev/$d"; done
mount -t proc proc "$r/proc"
ln -s /proc/self/fd "$r/dev/fd"
mount --bind "$root" "$r/proj"
cp "$frame" "$r/tmp/frame.exr"

cat > "$r/tmp/inside.sh" <<'INSIDE'
set -u
cd /proj
source .peerdeps/enter.sh || { echo "check_peers: .peerdeps/enter.sh failed"; exit 1; }  # enters .devdeps too
echo "check_peers: PATH=$PATH"
echo "check_peers: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
bad=0
declare -A stockused=()
objs=()
for b in pfsin pfsinexr pfstmo_reinhard02 pfsgamma pfsout pfsoutimgmagick oiiotool luminance-hdr-cli; do
  p=$(command -v "$b") && objs+=("$p") || echo "check_peers: $b: not carried"
done
[ -n "${MAGICK_CODER_MODULE_PATH:-}" ] && objs+=("$MAGICK_CODER_MODULE_PATH/png.so")
[ -n "${QT_PLUGIN_PATH:-}" ] && objs+=("$QT_PLUGIN_PATH/platforms/libqoffscreen.so" "$QT_PLUGIN_PATH/platforms/libqminimal.so")
for o in "${objs[@]}"; do
  head -c 4 "$o" | grep -q ELF || { echo "check_peers: $o: a script"; continue; }
  n_peer=0 n_stub=0 n_dev=0 n_stock=0
  while read -r name arrow path _; do
    case "$arrow $path" in
      "=> not") echo "check_peers: $o: $name NOT FOUND"; bad=1 ;;
      "=> /tmp/peerdeps/stubs/"*) n_stub=$((n_stub+1)) ;;
      "=> /tmp/peerdeps/"*) n_peer=$((n_peer+1)) ;;
      "=> /tmp/devdeps/"*) n_dev=$((n_dev+1)) ;;
      "=> /"*) n_stock=$((n_stock+1)); stockused[$name]=$path ;;
    esac
  done < <(ldd "$o")
  echo "check_peers: $o: $n_peer from .peerdeps, $n_stub stand-ins, $n_dev from .devdeps, $n_stock from the stock system"
done
echo "check_peers: libraries taken from the system (the stock set, or the GL loaders .devdeps unpacks into /): ${!stockused[*]}"
[ $bad = 0 ] || { echo "check_peers: FAILED: libraries not found"; exit 1; }
python3 bench/peers/cpu_tools.py /tmp/frame.exr --out /tmp "$@" --json /tmp/peers.json
INSIDE
rc=0
env -i HOME=/root TERM=dumb PATH=/usr/bin:/usr/sbin LANG=C chroot "$r" /bin/bash /tmp/inside.sh "$@" || rc=$?
cp "$r/tmp/peers.json" "$work/peers.json" 2>/dev/null || true
for f in "$r"/tmp/*.png; do [ -f "$f" ] && cp "$f" "$work/"; done
exit $rc
