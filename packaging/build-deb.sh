#!/usr/bin/env bash
# packaging/build-deb.sh OUT_DIR VERSION PYTHON: the .deb that `make deb` makes
# (docs/packaging.md says what is in it and why).
#
# Built with dpkg-deb from a tree staged here, so that every byte is chosen: the programs are
# compiled afresh into OUT_DIR/bin with the build folder's path mapped away
# (-ffile-prefix-map), every file's mtime is SOURCE_DATE_EPOCH (the commit's time), owners are
# root (--root-owner-group), dpkg-deb sorts the tree and stamps the ar members with
# SOURCE_DATE_EPOCH, gzip is -n, and no .pyc is shipped (postinst compiles them, py3compile,
# as Debian's Python packages do).  Two runs on one commit give the same bytes
# (tests/test_deb.py).
set -euo pipefail

out=$(realpath -m "$1") version=$2 python=$3
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
: "${SOURCE_DATE_EPOCH:?SOURCE_DATE_EPOCH must be set (make deb sets it from the commit)}"
# argparse wraps the man page's text at the terminal's width (COLUMNS, else the tty's): a build
# from a wide terminal gave another tw.1.gz than one from a script.  Fixed at 80.
export SOURCE_DATE_EPOCH LC_ALL=C TZ=UTC COLUMNS=80
umask 022
arch=amd64
pkg=timewrite
# The maintainer: DEB_MAINTAINER, else the commit's committer (so it is the commit's, too).
maint=${DEB_MAINTAINER:-$(git log -1 --format='%cn <%ce>' 2>/dev/null || true)}
maint=${maint:-timewrite <timewrite@localhost>}
deb="$out/${pkg}_${version}_${arch}.deb"
bin="$out/bin"
root="$out/root"
lib="$root/usr/lib/$pkg"

# --- the programs, compiled for the package ----------------------------------------------
# The checkout's path is mapped to '.' (C and BPF), and nasm records no debug information
# (it would hold the absolute folder: NASM_DEBUG in the Makefile), so that a build in another
# folder gives the same bytes, build IDs included.
map="-ffile-prefix-map=$here=."
make --no-print-directory -s -j2 TW_DEPS_CHECKED=1 BUILD="$bin" \
	CFLAGS="-O2 -g $map" BPF_EXTRA_CFLAGS="$map" NASM_DEBUG= binaries >&2

# --- the tree ----------------------------------------------------------------------------
rm -rf "$root"
mkdir -p "$lib/build/watch" "$lib/build/walls" "$root/usr/bin" "$root/DEBIAN"

# The toolkit's Python, without caches; tw itself runs Debian's python3.
(cd scripts && find twtools -name '*.py' -print0 | sort -z |
	xargs -0 -I{} install -D -m 0644 {} "$lib/scripts/{}")
sed '1s|^#!.*|#!/usr/bin/python3|' scripts/tw >"$lib/scripts/tw"
chmod 0755 "$lib/scripts/tw"
ln -s ../lib/$pkg/scripts/tw "$root/usr/bin/tw"
printf '%s\n' "$version" >"$lib/VERSION"

# What tw reads beside its code: the registry, the bpftrace tools, the stubs' sources (tw
# explain prints their header comments), the seed's numbers and the atlas, and the walls'
# profiles and rules (tw ab --wall, tw explain --wall).
for d in variants traces asm timewrite syscost data walls; do
	git ls-files -z -- "$d" | xargs -0 -I{} install -D -m 0644 {} "$lib/{}"
done

# The UAPI headers the programs were compiled against: the syscall numbers tw reads
# (machine/sysnr.py), so that a host needs no linux-libc-dev.
for h in unistd_32.h unistd_64.h; do
	install -D -m 0644 "/usr/include/$(cc -print-multiarch)/asm/$h" "$lib/include/asm/$h"
done

# The programs.  Their symbol tables are kept: tw explain, tw classify and the tests find the
# stubs in them by name (the lintian override says so); only the debug sections go.
for f in "$bin"/*; do
	[ -f "$f" ] && [ ! -L "$f" ] || continue
	strip --strip-debug --remove-section=.comment -o "$lib/build/$(basename "$f")" "$f"
	chmod 0755 "$lib/build/$(basename "$f")"
done
ln -s timewrite-64-libc "$lib/build/timewrite"
# The BPF objects keep their BTF (.BTF, .BTF.ext: CO-RE relocates with it); DWARF goes.
for f in "$bin"/watch/*.bpf.o "$bin"/walls/*.bpf.o; do
	d=$(basename "$(dirname "$f")")
	llvm-strip --strip-debug -o "$lib/build/$d/$(basename "$f")" "$f"
	chmod 0644 "$lib/build/$d/$(basename "$f")"
done

# The man page and bash completion, from the argparse parsers (twtools.cli.manual).
mkdir -p "$root/usr/share/man/man1" "$root/usr/share/bash-completion/completions"
(cd scripts && "$python" -m twtools.cli.manual man) | gzip -n -9 >"$root/usr/share/man/man1/tw.1.gz"
(cd scripts && "$python" -m twtools.cli.manual bash) >"$root/usr/share/bash-completion/completions/tw"

# The unit: systemd/timewrite-watch.service with the package's paths (one file, two routes).
mkdir -p "$root/lib/systemd/system"
sed -e 's|^Documentation=.*|Documentation=man:tw(1) file:///usr/share/doc/timewrite/watch.md|' \
	-e 's|^Environment=TW=.*|Environment="TW_WATCH_OPTIONS=--listen 127.0.0.1:9864"\nEnvironmentFile=-/etc/default/timewrite-watch\nWorkingDirectory=/var/lib/timewrite-watch|' \
	-e 's|^ExecStart=.*|ExecStart=/usr/bin/tw watch --state /var/lib/timewrite-watch $TW_WATCH_OPTIONS|' \
	-e '/^# Install: copy this file/,/^# then `systemctl daemon-reload/c\
# Installed by the timewrite package: enable it with `systemctl enable --now timewrite-watch`.\
# Its options: TW_WATCH_OPTIONS in /etc/default/timewrite-watch (the default is below).' \
	systemd/timewrite-watch.service >"$root/lib/systemd/system/timewrite-watch.service"
grep -q '^ExecStart=/usr/bin/tw watch' "$root/lib/systemd/system/timewrite-watch.service"

# Documentation, copyright, changelog, lintian's overrides.
doc="$root/usr/share/doc/$pkg"
mkdir -p "$doc" "$root/usr/share/lintian/overrides"
install -m 0644 packaging/copyright "$doc/copyright"
install -m 0644 docs/watch.md docs/packaging.md "$doc/"
{
	printf '%s (%s) unstable; urgency=medium\n\n' "$pkg" "$version"
	printf '  * Built by make deb from commit %s.\n\n' "$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
	printf ' -- %s  %s\n' "$maint" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -n -9 >"$doc/changelog.gz"
install -m 0644 packaging/lintian-overrides "$root/usr/share/lintian/overrides/$pkg"

# --- control ------------------------------------------------------------------------------
for s in postinst prerm postrm; do
	install -m 0755 "packaging/$s" "$root/DEBIAN/$s"
done
size=$(du -sk --apparent-size --exclude=DEBIAN "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@SIZE@|$size|" -e "s|@MAINTAINER@|$maint|" packaging/control.in >"$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
	xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

# Every directory 0755, every mtime the commit's.
find "$root" -type d -exec chmod 0755 {} +
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

rm -f "$out"/*.deb
dpkg-deb --root-owner-group -Zxz -z9 --build "$root" "$deb" >&2
echo "$deb"
