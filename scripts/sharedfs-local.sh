#!/usr/bin/env bash
# sharedfs-local.sh: a shared file system that caches, on this machine, for
# trying nodepack's pool on it and for the tests and CI: several FUSE mounts
# of one backing directory (the "server"), one per "node", each with its own
# kernel caches of attributes, directory entries and "no such file" (as
# NFS's actimeo), and faults injected per mount (scripts/sharedfs: lost
# link and rename replies, ESTALE, a full disk, a hung mount).
#
#   scripts/sharedfs-local.sh start [NODES] [CACHE]
#                       build scripts/sharedfs, mount NODES (4) nodes with
#                       caches of CACHE (60s) in SHAREDFS_LOCAL_DIR
#   scripts/sharedfs-local.sh env
#                       print "export SHAREDFS_…=…" for eval: SHAREDFS_NODES
#                       (the mounts, one per node, space-separated),
#                       SHAREDFS_BACKING, SHAREDFS_PATH (where `run` shows a node)
#   scripts/sharedfs-local.sh fault K SPEC
#                       node K's faults from now (K from 1): "lose=0.05",
#                       "estale=0.01", "enospc=1", "hang=1"; "" clears them
#   scripts/sharedfs-local.sh run K CMD [ARG...]
#                       run CMD in a mount namespace of its own (unshare -m)
#                       where node K's mount is at SHAREDFS_PATH: every node
#                       sees the sweep at the same path through its own cache
#   scripts/sharedfs-local.sh stop
#                       unmount every node, stop their servers
#
# Needs /dev/fuse and root (mount(2) for FUSE and for run's bind mount) and
# Go (to build the tool). Knobs: SHAREDFS_LOCAL_DIR (/tmp/nodepack-sharedfs).
# What it imitates and what it does not: docs/batch.md, "Shared file
# systems". Every command is idempotent.
set -euo pipefail

dir=${SHAREDFS_LOCAL_DIR:-/tmp/nodepack-sharedfs}
repo=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "sharedfs-local: $*" >&2; exit 1; }

mounted() { grep -qF " $1 " /proc/self/mountinfo; }

nodes() {
	local k=1
	while [ -d "$dir/node$k" ]; do
		echo "$dir/node$k"
		k=$((k + 1))
	done
}

cmd_start() {
	local n=${1:-4} cache=${2:-60s}
	[ -e /dev/fuse ] || die "no /dev/fuse here: FUSE is needed"
	[ "$(id -u)" = 0 ] || die "must run as root (mount(2))"
	mkdir -p "$dir/bin" "$dir/backing" "$dir/sweep"
	(cd "$repo" && go build -o "$dir/bin/sharedfs" ./scripts/sharedfs) || die "cannot build scripts/sharedfs"
	for k in $(seq 1 "$n"); do
		local m=$dir/node$k
		mkdir -p "$m"
		mounted "$m" && continue
		: >"$dir/control$k"
		"$dir/bin/sharedfs" -backing "$dir/backing" -mount "$m" -cache "$cache" -control "$dir/control$k" \
			>"$dir/node$k.log" 2>&1 &
		echo $! >"$dir/node$k.pid"
		for _ in $(seq 1 100); do
			mounted "$m" && break
			kill -0 "$(cat "$dir/node$k.pid")" 2>/dev/null || die "node $k did not mount: $(cat "$dir/node$k.log")"
			sleep 0.05
		done
		mounted "$m" || die "node $k did not mount in 5 s: $(cat "$dir/node$k.log")"
	done
	echo "sharedfs-local: $n nodes of $dir/backing, caches $cache: $(nodes | tr '\n' ' ')"
}

cmd_env() {
	echo "export SHAREDFS_BACKING=$dir/backing"
	echo "export SHAREDFS_NODES=\"$(nodes | tr '\n' ' ' | sed 's/ $//')\""
	echo "export SHAREDFS_PATH=$dir/sweep"
}

cmd_fault() {
	local k=${1:?node} spec=${2-}
	[ -f "$dir/control$k" ] || die "no node $k"
	printf '%s\n' "$spec" >"$dir/control$k.new"
	mv "$dir/control$k.new" "$dir/control$k"
	sleep 0.2 # the server reads it every 0.1 s
}

cmd_run() {
	local k=${1:?node}
	shift
	[ -d "$dir/node$k" ] && mounted "$dir/node$k" || die "node $k is not mounted"
	exec unshare -m --propagation private sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$dir/node$k" "$dir/sweep" "$@"
}

cmd_stop() {
	local k=1
	while [ -d "$dir/node$k" ]; do
		[ -f "$dir/control$k" ] && : >"$dir/control$k" # no hang left to block the unmount
		if [ -f "$dir/node$k.pid" ]; then
			kill "$(cat "$dir/node$k.pid")" 2>/dev/null || true
		fi
		for _ in $(seq 1 50); do
			mounted "$dir/node$k" || break
			sleep 0.1
		done
		mounted "$dir/node$k" && umount -l "$dir/node$k" 2>/dev/null || true
		rm -f "$dir/node$k.pid"
		k=$((k + 1))
	done
}

case ${1:-} in
start) shift; cmd_start "$@" ;;
env) cmd_env ;;
fault) shift; cmd_fault "$@" ;;
run) shift; cmd_run "$@" ;;
stop) cmd_stop ;;
*) die "usage: $0 start [NODES] [CACHE] | env | fault K SPEC | run K CMD... | stop" ;;
esac
