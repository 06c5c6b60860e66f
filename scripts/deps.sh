#!/usr/bin/env bash
# deps.sh: make sure the system tools timewrite needs are installed.
#
# As root, missing Debian/Ubuntu packages are installed with apt-get.  As any
# other user nothing is installed: the exact command to run is printed and the
# script exits 1, so `make test` and `make report` stop before a half-built run.
# `deps.sh build` checks only what `make` needs to compile (gcc, multilib, nasm).
# Each check tests the capability (gcc -m32 links, python3 -m venv works), not
# only the presence of a command, because that is what fails on a fresh box.
set -u

missing=()
need() { # need PACKAGE TEST-COMMAND...
	local pkg=$1; shift
	"$@" >/dev/null 2>&1 || missing+=("$pkg")
}

distro=$( . /etc/os-release 2>/dev/null; echo "${ID:-unknown}" )
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf 'int main(void){return 0;}\n' >"$tmp/t.c"

need make        command -v make
need gcc         command -v gcc
need gcc-multilib gcc -m32 -o "$tmp/t32" "$tmp/t.c"
need nasm        command -v nasm
need binutils    command -v objdump
if [ "${1:-all}" != build ]; then
need strace      command -v strace
need bpftrace    command -v bpftrace
need python3-venv python3 -m venv --without-pip "$tmp/venv"
need procps      command -v ps
need util-linux  command -v taskset
if [ "$distro" = ubuntu ]; then
	# Ubuntu ships perf per kernel; linux-tools-generic follows the generic kernel.
	need "linux-tools-common linux-tools-$(uname -r)" perf --version
else
	need linux-perf  perf --version
fi
fi

[ ${#missing[@]} -eq 0 ] && exit 0

cmd="apt-get install -y ${missing[*]}"
if [ "$EUID" -ne 0 ]; then
	echo "timewrite: missing packages: ${missing[*]}" >&2
	echo "timewrite: run as root:  apt-get update && $cmd" >&2
	exit 1
fi
echo "timewrite: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2 && apt-get install -y -qq ${missing[*]} >&2 || {
	echo "timewrite: '$cmd' failed; see the messages above" >&2
	exit 1
}
