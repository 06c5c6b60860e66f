#!/usr/bin/env bash
# deps.sh [build|deb|report|test]: make sure this machine has what that step needs.
#
#   build    what `make` needs to compile: make, a C compiler that links -m32, nasm, binutils,
#            clang's BPF target and libbpf (tw watch's programs)
#   deb      build + what `make deb` needs: python3 with a venv that has pip (the man page is
#            drawn from the parsers, which import numpy), llvm-strip (the BPF objects' DWARF)
#            and Debian's argparse-manpage
#   report   build + what measuring needs: python3 with a venv that has pip, strace,
#            perf, bpftrace, taskset, ps, and tracefs mounted at /sys/kernel/tracing;
#            libseccomp2 (tw ab --wall compiles seccomp profiles with it), libseccomp-dev
#            (make bench-walls' own libseccomp program) and bpftool (which programs are
#            attached to raw_syscalls: every process pays for them)
#   test     report + what only the tests need: chromium (the report in a real
#            browser), golang-go (a Go GOARCH=386 program) and openssh-server (the
#            fleet playbook's loopback test starts its own sshd on 127.0.0.1) and
#            prometheus (tw watch's test scrapes it with its own, on 127.0.0.1),
#            golang-github-containers-common (podman's default seccomp profile, which the
#            walls' tests read as Debian ships it; files only, no service), and what
#            `make deb` needs and lintian (tests/test_deb.py checks the package with it);
#            debootstrap with TW_DEB_TEST=1 (the package in a clean Debian root),
#            systemd-container too with TW_SYSTEMD_TEST=1 (the unit under systemd, in
#            nspawn); and
#            auditctl for the audit wall's tests.  auditctl comes with Debian's auditd
#            package, whose install would enable auditd for the next boot, and once auditd
#            has run, audit makes every process pay on every call until reboot
#            (docs/walls.md): so the test step does not install auditd, it unpacks the
#            package's files into build/auditd (apt-get download, dpkg-deb -x) and installs
#            only its library, libauparse0.  A machine with auditctl uses its own.
#
# Each check tries the capability (cc -m32 links, `python3 -m venv` gives a venv
# whose pip runs), not only the presence of a command, because that is what
# fails on a fresh machine.  As root, what is missing is installed with apt-get
# (one line per phase on stderr, the full output in a log file whose path is
# printed on failure) and tracefs is mounted.  As any other user nothing is
# changed: one complete command is printed for root to run, and the script
# exits 1, so `make test` and `make report` stop before a half-built run.
# bash is Essential on Debian and Ubuntu, so it is there on a bare machine.
set -u

phase=${1:-report}
case $phase in
build | deb | report | test) ;;
*) echo "usage: scripts/deps.sh [build|deb|report|test]" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "$0")/.." && pwd)
distro=$( . /etc/os-release 2>/dev/null; echo "${ID:-unknown}" )
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tw-deps.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
printf '#include <math.h>\nint main(int c, char **v){(void)v; return (int)sqrt(c);}\n' >"$tmp/t.c"
printf 'bits 32\nglobal f\nf: int 0x80\n' >"$tmp/t.asm"
# tw watch's programs: BPF objects (clang's BPF target, libbpf's headers, the UAPI headers)
# and a loader linked against libbpf.
printf '#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\nchar L[] SEC("license") = "GPL";\n' >"$tmp/t.bpf.c"
printf '#include <bpf/libbpf.h>\nint main(void){ return libbpf_major_version() < 1; }\n' >"$tmp/tl.c"
TRACEFS=/sys/kernel/tracing

# --- checks: each adds the Debian packages that provide what failed -----------

missing=()
add() { # add PACKAGE... (once each, in order)
	local p
	for p in "$@"; do
		case " ${missing[*]-} " in *" $p "*) ;; *) missing+=("$p") ;; esac
	done
}
# The tests run side by side (each a compile or a tool's start-up; one after another they
# took a second of every `make check`): need starts one in the background, and check() adds
# the packages of those that failed once all are done, in the order they were asked for.
need() { # need PACKAGES TEST-COMMAND...
	local pkgs=$1; shift
	nneed=$((nneed + 1))
	{ "$@" >/dev/null 2>&1 || echo "$pkgs" >"$tmp/need.$nneed"; } &
}

venv_with_pip() {
	# The project's venv, once built, is what every later step uses: its pip is enough.  Its
	# stamp says pip installed into it; that pip is still there is shown by importing it
	# (0.02 s: `pip --version` took 0.3 s, the longest of every `make check`'s checks).
	if [ -f "$here/.venv/.stamp" ] && "$here/.venv/bin/python" -c "import pip"; then
		return 0
	fi
	# Otherwise `python3 -m venv .venv` must give a venv with pip (Debian's python3
	# without python3-venv makes one without pip, or fails: "ensurepip is not available").
	python3 -m venv "$tmp/venv" && "$tmp/venv/bin/python" -m pip --version
}

tracefs_mounted() {
	# Mount points in mountinfo are relative to this process's root, so this is right
	# in a chroot too; the directory itself is readable only by root.
	awk -v m="$TRACEFS" '$5 == m { for (i = 7; i <= NF; i++) if ($i == "-") { print $(i + 1); exit } }' \
		/proc/self/mountinfo 2>/dev/null | grep -qx tracefs
}

check() {
	missing=()
	nneed=0
	rm -f "$tmp"/need.*
	checks
	wait
	local i
	for ((i = 1; i <= nneed; i++)); do
		# shellcheck disable=SC2046  # the file holds a space-separated list of packages
		[ -f "$tmp/need.$i" ] && add $(cat "$tmp/need.$i")
	done
}

checks() { # each need() of the phase, started in the background
	need make make --version
	need gcc cc -o "$tmp/t64" "$tmp/t.c" -lm
	need gcc-multilib cc -m32 -no-pie -fno-pie -o "$tmp/t32" "$tmp/t.c" -lm
	need nasm nasm -f elf32 -o "$tmp/t.o" "$tmp/t.asm"
	need binutils objdump --version
	need clang clang -target bpf -I"/usr/include/$(cc -print-multiarch 2>/dev/null)" -c -o "$tmp/t.bpf.o" "$tmp/t.bpf.c"
	need libbpf-dev cc -o "$tmp/tl" "$tmp/tl.c" -lbpf
	[ "$phase" = build ] && return
	need python3 python3 --version
	need python3-venv venv_with_pip
	if [ "$phase" = deb ] || [ "$phase" = test ]; then
		need llvm llvm-strip --version
		need python3-argparse-manpage test -f /usr/lib/python3/dist-packages/build_manpages/manpage.py
	fi
	[ "$phase" = deb ] && return
	need strace strace -V
	need bpftrace bpftrace --version
	need libseccomp2 sh -c "ldconfig -p | grep -q 'libseccomp.so.2 '"
	need bpftool sh -c 'command -v bpftool || test -x /usr/sbin/bpftool'
	need libseccomp-dev test -e /usr/include/seccomp.h
	need procps ps -p $$
	need util-linux taskset -p $$
	if [ "$distro" = ubuntu ]; then
		# Ubuntu ships perf per kernel; linux-tools-generic follows the generic kernel.
		need "linux-tools-common linux-tools-$(uname -r)" perf --version
	else
		need linux-perf perf --version
	fi
	[ "$phase" = report ] && return
	if [ "$distro" = ubuntu ]; then
		need chromium-browser chromium-browser --version
	else
		need chromium chromium --version
	fi
	# GOARCH=386 builds need only the toolchain's own support for linux/386.
	need golang-go sh -c 'go tool dist list | grep -qx linux/386'
	# tests/test_fleet_ansible.py runs its own sshd, on a loopback port, and stops it.
	need openssh-server test -x /usr/sbin/sshd
	# tests/test_watch_live.py runs its own Prometheus on 127.0.0.1 to scrape tw watch.
	need prometheus test -x /usr/bin/prometheus
	need lintian lintian --version
	need libauparse0 sh -c "ldconfig -p | grep -q 'libauparse.so.0 '"
	# podman's default seccomp profile as Debian ships it (tests/test_seccomp_profiles.py)
	need golang-github-containers-common test -f /usr/share/containers/seccomp.json
	if [ -n "${TW_DEB_TEST-}" ]; then
		need debootstrap debootstrap --version   # tests/test_deb.py's clean Debian 12 root
	fi
	if [ -n "${TW_SYSTEMD_TEST-}" ]; then
		# tests/test_deb_systemd.py boots a debootstrap root with systemd in systemd-nspawn
		need debootstrap debootstrap --version
		need systemd-container systemd-nspawn --version
	fi
	if [ -n "${TW_SETUP_TEST-}" ]; then
		need mmdebstrap mmdebstrap --version   # tests/test_setup_chroot.py builds a minbase root
	fi
}

# tracefs: bpftrace and perf's tracepoints fail with "tracepoint not found" without it.
mount_tracefs=
if [ "$phase" != build ] && [ "$phase" != deb ] && [ -d "$TRACEFS" ] && ! tracefs_mounted; then
	mount_tracefs="mount -t tracefs nodev $TRACEFS"
fi

# auditctl for the tests, unpacked from Debian's auditd package without installing it (above).
auditctl_present() {
	command -v auditctl >/dev/null 2>&1 || test -x /sbin/auditctl || test -x /usr/sbin/auditctl ||
		test -x "$here/build/auditd/sbin/auditctl"
}
unpack_auditctl() {
	[ "$phase" = test ] && ! auditctl_present || return 0
	if (cd "$tmp" && apt-get download auditd >>"$tmp/auditd.log" 2>&1) &&
		mkdir -p "$here/build/auditd" && dpkg-deb -x "$tmp"/auditd_*.deb "$here/build/auditd" &&
		"$here/build/auditd/sbin/auditctl" -v >/dev/null 2>&1; then
		echo "timewrite: unpacked auditctl from Debian's auditd into build/auditd (not installed: no auditd runs)" >&2
	else
		echo "timewrite: could not unpack auditctl from Debian's auditd package (log: $tmp/auditd.log); the audit wall's tests will fail" >&2
	fi
}

check
if [ ${#missing[@]} -eq 0 ] && [ -z "$mount_tracefs" ]; then
	unpack_auditctl
	exit 0
fi

install="apt-get install -y ${missing[*]-}"
if [ "$EUID" -ne 0 ]; then
	if [ ${#missing[@]} -eq 0 ]; then
		# Everything is installed; only root's tracing is affected, and it is root's to fix.
		echo "timewrite: tracefs is not mounted at $TRACEFS (tracing as root needs it): as root, run: $mount_tracefs" >&2
		exit 0
	fi
	cmd="apt-get update && $install"
	[ -n "$mount_tracefs" ] && cmd="$cmd && $mount_tracefs"
	echo "timewrite: missing for '$phase': ${missing[*]}${mount_tracefs:+; tracefs is not mounted at $TRACEFS}" >&2
	echo "timewrite: run this one command as root, then run the same step again:" >&2
	echo "$cmd" >&2
	exit 1
fi

# --- root: install, quietly, with the full output in a log ----------------------

log="$here/build/setup.log"
if ! { mkdir -p "$here/build" && : >"$log"; } 2>/dev/null; then
	log=$(mktemp "${TMPDIR:-/tmp}/timewrite-setup.XXXXXX.log") || exit 1
fi
fail() { # fail WHAT
	echo "timewrite: $1 failed; full log: $log" >&2
	exit 1
}

if [ ${#missing[@]} -gt 0 ]; then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "timewrite: no apt-get here; install the equivalents of these Debian packages: ${missing[*]}" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	echo "timewrite: apt-get update … (log: $log)" >&2
	# One index that fails (a third-party repository with a lapsed key, a mirror
	# mid-sync) fails the whole update, though everything needed may install from
	# the rest.  So the install is tried anyway, and the update's error is shown
	# only if the install then fails, as the likely cause.
	update_out="$tmp/apt-update.out"
	update_failed=
	apt-get -o DPkg::Lock::Timeout=300 update >"$update_out" 2>&1 || update_failed=1
	cat "$update_out" >>"$log"
	show_update_error() {
		[ -n "$update_failed" ] || return 0
		echo "timewrite: apt-get update had failed before that; its errors:" >&2
		# apt's own lines, with control characters dropped: a repository's text is not ours.
		grep -E '^(E|Err):' "$update_out" | head -n 5 | LC_ALL=C tr -cd '[:print:]\n' |
			sed 's/^/  /' >&2
	}
	echo "timewrite: installing ${#missing[@]} Debian packages: ${missing[*]} …" >&2
	# openssh-server's package scripts start a system sshd listening on every address; only
	# the test's own loopback sshd is wanted.  Unless the machine already has a policy (a
	# container image usually has one that forbids every start), forbid starts for this
	# install only.
	policy=
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		policy=/usr/sbin/policy-rc.d
		printf '#!/bin/sh\n# timewrite set-up: no service starts during its install\nexit 101\n' >"$policy" &&
			chmod 755 "$policy" || policy=
	fi
	apt-get -o DPkg::Lock::Timeout=300 install -y "${missing[@]}" >>"$log" 2>&1
	rc=$?
	[ -n "$policy" ] && rm -f "$policy"
	if [ "$rc" -ne 0 ]; then
		show_update_error
		fail "'$install'"
	fi
	check
	if [ ${#missing[@]} -gt 0 ]; then
		show_update_error
		echo "timewrite: still not working after the install: ${missing[*]}; full log: $log" >&2
		exit 1
	fi
fi
unpack_auditctl

if [ -n "$mount_tracefs" ]; then
	if $mount_tracefs >>"$log" 2>&1; then
		echo "timewrite: mounted tracefs at $TRACEFS (bpftrace and perf tracepoints need it)" >&2
	else
		echo "timewrite: could not mount tracefs at $TRACEFS; tracepoints will be reported unknown; log: $log" >&2
	fi
fi
exit 0
