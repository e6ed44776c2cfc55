#!/usr/bin/env bash
# sge-local.sh: a real single-node Grid Engine (Son of Grid Engine 8.1.9,
# Debian's gridengine-* packages) on this machine, for trying nodepack
# against Grid Engine on a workstation and for CI. No systemd, no init
# scripts: one cell in one directory (SGE_LOCAL_DIR, which is SGE_ROOT);
# the packages' own cell under /var/lib/gridengine is never configured.
#
#   scripts/sge-local.sh start        install (apt) if needed, write a fresh cell, start sge_qmaster and sge_execd
#   scripts/sge-local.sh env          print "export SGE_ROOT=… PATH=…" for eval
#   scripts/sge-local.sh status       say whether the daemons run; exit 0 iff both do
#   scripts/sge-local.sh wait JOBID [TIMEOUT_S]
#                                     wait until the job (every array task) has left
#                                     the queue; exit 0 only if the last run of every
#                                     task ended with failed=0 and exit_status=0
#   scripts/sge-local.sh stop         delete the jobs, stop the daemons by their pid files
#
# The cell runs the example scripts as they are written: its queue has at
# least 16 slots (the examples' -pe smp 16; Grid Engine counts slots, not
# CPUs, and nodepack uses the CPUs this machine has), and a consumable
# complex gpu, SGE_LOCAL_GPUS of them: a job that asks -l gpu=N gets N fake
# GPUs in CUDA_VISIBLE_DEVICES (0,…,N-1, no driver behind them), as a
# site's prolog gives real ones; a job that sets CUDA_VISIBLE_DEVICES
# itself (-v, -V) keeps its own.
#
# Knobs (environment, read at start): SGE_LOCAL_DIR (/tmp/nodepack-sge; an
# absolute path at least two levels deep: start removes parts of it),
# SGE_LOCAL_PORT (6444; sge_execd uses the next port), SGE_LOCAL_SLOTS
# (nproc, at least 16), SGE_LOCAL_GPUS (4), SGE_LOCAL_NOTIFY (00:00:60: how
# long -notify jobs have between SIGUSR1/SIGUSR2 and SIGSTOP/SIGKILL). Must
# run as root. Every command is idempotent, and stop kills only what start
# started.
set -euo pipefail

dir=${SGE_LOCAL_DIR:-/tmp/nodepack-sge}
port=${SGE_LOCAL_PORT:-6444}
slots=${SGE_LOCAL_SLOTS:-$(($(nproc) > 16 ? $(nproc) : 16))}
gpus=${SGE_LOCAL_GPUS:-4}
notify=${SGE_LOCAL_NOTIFY:-00:00:60}
lib=/usr/lib/gridengine

die() { echo "sge-local: $*" >&2; exit 1; }

case "$dir" in
/*/*) ;;
*) die "SGE_LOCAL_DIR=$dir: want an absolute path at least two levels deep" ;;
esac

# The daemons and clients see only what they need: sge_execd passes its own
# environment on to every job, and a client needs no more either.
export SGE_ROOT=$dir SGE_CELL=default SGE_QMASTER_PORT=$port SGE_EXECD_PORT=$((port + 1))
clean_env=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SGE_ROOT="$SGE_ROOT" SGE_CELL="$SGE_CELL"
	SGE_QMASTER_PORT="$SGE_QMASTER_PORT" SGE_EXECD_PORT="$SGE_EXECD_PORT")
# The real binaries: Debian's /usr/bin/q* wrappers fork util/arch on every call.
q() { "${clean_env[@]}" "$lib/$1" "${@:2}"; }

# quiet runs a client that says what it did on stderr: only a failure shows.
quiet() {
	local out
	out=$(q "$@" 2>&1) || die "$1 ${*:2}: $out"
}

qmaster_pid=$dir/spool/qmaster/qmaster.pid

# alive NAME PIDFILE: the daemon whose pid file that is runs, and the pid is
# really that daemon (the files stay behind, and pids are reused).
alive() {
	local pid
	pid=$(cat "$2" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ]
}

# sge_execd names its spool directory after its own (unaliased) host name.
execd_pid() { compgen -G "$dir/spool/execd/*/execd.pid" | head -n 1; }
qmaster_up() { alive sge_qmaster "$qmaster_pid"; }
execd_up() { local f; f=$(execd_pid) && alive sge_execd "$f"; }

install_packages() {
	[ -x "$lib/sge_qmaster" ] && [ -x "$lib/sge_execd" ] && [ -x "$lib/qsub" ] && return
	[ "$(id -u)" = 0 ] || die "need root to install gridengine"
	apt-get update -qq
	# Without these the packages configure a cell of their own, with an
	# empty act_qmaster that breaks every client run without SGE_ROOT.
	debconf-set-selections <<-SEED
		gridengine-common shared/gridengineconfig boolean false
		gridengine-common shared/gridenginecell string default
	SEED
	# dma: the mail transport gridengine-common's mailx needs, without a
	# daemon (apt would pick exim4).
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		gridengine-master gridengine-exec gridengine-client dma >/dev/null
}

write_cell() {
	local host common=$dir/default/common
	host=$(hostname)
	getent hosts "$host" >/dev/null || die "host name '$host' does not resolve (Grid Engine needs that); add a line for it to /etc/hosts"
	rm -rf "$dir/default" "$dir/spool" "$dir/tmp"
	mkdir -p "$common" "$dir/spool/qmaster" "$dir/spool/execd" "$dir/tmp" "$dir/bin"
	chmod 1777 "$dir/tmp"
	ln -sfn "$lib" "$dir/bin/lx-amd64"
	ln -sfn "$lib" "$dir/lib"
	mkdir -p "$dir/utilbin"
	ln -sfn "$lib" "$dir/utilbin/lx-amd64"
	ln -sfn /usr/share/gridengine/util "$dir/util"
	cat >"$common/bootstrap" <<-BOOT
		# written by nodepack's scripts/sge-local.sh
		admin_user              none
		default_domain          none
		ignore_fqdn             false
		spooling_method         classic
		spooling_lib            libspoolc
		spooling_params         $common;$dir/spool/qmaster
		binary_path             /usr/sbin
		qmaster_spool_dir       $dir/spool/qmaster
		security_mode           none
		listener_threads        2
		worker_threads          2
		scheduler_threads       1
	BOOT
	echo "$host" >"$common/act_qmaster"
	# The host's address may resolve back to another name (127.0.0.1 →
	# localhost): Grid Engine then refuses its own clients unless the two
	# names are aliases.
	local back
	back=$(getent hosts "$(getent hosts "$host" | awk '{print $1; exit}')" | awk '{print $2; exit}')
	if [ -n "$back" ] && [ "$back" != "$host" ]; then
		echo "$host $back" >"$common/host_aliases"
	fi
	sed -e "s|^execd_spool_dir .*|execd_spool_dir        $dir/spool/execd|" \
		-e 's|^min_uid .*|min_uid                0|' -e 's|^min_gid .*|min_gid                0|' \
		-e 's|^mailer .*|mailer                 /bin/true|' \
		-e 's|^shell_start_mode .*|shell_start_mode       unix_behavior|' \
		-e 's|^load_report_time .*|load_report_time       00:00:10|' \
		-e 's|^reporting_params .*|reporting_params       accounting=true reporting=false flush_time=00:00:01 joblog=false sharelog=00:00:00 accounting_flush_time=00:00:00|' \
		/usr/share/gridengine/default-configuration >"$dir/configuration"
	q spoolinit classic libspoolc "$common;$dir/spool/qmaster" init >/dev/null
	q spooldefaults configuration "$dir/configuration" >/dev/null
	q spooldefaults complexes /usr/share/gridengine/util/resources/centry >/dev/null
	q spooldefaults usersets /usr/share/gridengine/util/resources/usersets >/dev/null
	q spooldefaults managers root >/dev/null
}

# configure: the scheduler (every second), the complex gpu, this host as
# admin and exec host with its fake GPUs, a parallel environment smp, and
# the queue all.q, whose starter gives a job the GPUs it asked for. gpu
# is consumed per job (JOB), not per slot: -pe smp 16 -l gpu=4 is 4 GPUs.
configure() {
	local host f=$dir/conf.tmp
	host=$(hostname)
	{ q qconf -sc; echo "gpu gpu INT <= YES JOB 0 0"; } >"$f"
	quiet qconf -Mc "$f"
	cat >"$dir/starter.sh" <<-'STARTER'
		#!/bin/bash
		# sge-local.sh's starter_method: a job that asked for -l gpu=N gets N
		# fake GPUs, as a site's prolog would give it real ones.
		if [ -z "${CUDA_VISIBLE_DEVICES+set}" ]; then
			n=$("$SGE_ROOT/bin/lx-amd64/qstat" -j "$JOB_ID" 2>/dev/null |
				sed -n 's/^hard resource_list: *//p' | tr ',' '\n' | sed -n 's/^gpu=//p' | head -n 1)
			if [ -n "$n" ] && [ "$n" -gt 0 ]; then
				export CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1)))
			fi
		fi
		exec "$@"
	STARTER
	chmod 755 "$dir/starter.sh"
	q qconf -ssconf |
		sed -e 's/^schedule_interval .*/schedule_interval                 0:0:1/' \
			-e 's/^flush_submit_sec .*/flush_submit_sec                  1/' \
			-e 's/^flush_finish_sec .*/flush_finish_sec                  1/' \
			-e 's/^job_load_adjustments .*/job_load_adjustments              NONE/' >"$f"
	quiet qconf -Msconf "$f"
	q qconf -as "$host" >/dev/null 2>&1 || true
	printf 'hostname %s\nload_scaling NONE\ncomplex_values gpu=%s\nuser_lists NONE\nxuser_lists NONE\nprojects NONE\nxprojects NONE\nusage_scaling NONE\nreport_variables NONE\n' "$host" "$gpus" >"$f"
	quiet qconf -Ae "$f"
	cat >"$f" <<-PE
		pe_name            smp
		slots              9999
		user_lists         NONE
		xuser_lists        NONE
		start_proc_args    NONE
		stop_proc_args     NONE
		allocation_rule    \$pe_slots
		control_slaves     TRUE
		job_is_first_task  TRUE
		urgency_slots      min
		accounting_summary FALSE
		qsort_args         NONE
	PE
	quiet qconf -Ap "$f"
	# qconf's own template for a queue, as qconf -aq would open it (it then
	# fails: the template names PEs that do not exist).
	{ "${clean_env[@]}" EDITOR=cat "$lib/qconf" -aq all.q 2>/dev/null || true; } |
		sed -e 's/^qname .*/qname                 all.q/' \
			-e "s/^hostlist .*/hostlist              $host/" \
			-e "s/^slots .*/slots                 $slots/" \
			-e 's/^pe_list .*/pe_list               smp/' \
			-e 's|^shell .*|shell                 /bin/bash|' \
			-e 's/^shell_start_mode .*/shell_start_mode      unix_behavior/' \
			-e 's/^load_thresholds .*/load_thresholds       NONE/' \
			-e "s|^tmpdir .*|tmpdir                $dir/tmp|" \
			-e "s|^starter_method .*|starter_method        $dir/starter.sh|" \
			-e "s/^notify .*/notify                $notify/" >"$f"
	grep -q '^qname ' "$f" || die "qconf gave no queue template"
	quiet qconf -Aq "$f"
	rm -f "$f"
}

start() {
	[ "$(id -u)" = 0 ] || die "must run as root"
	if qmaster_up && execd_up; then
		return 0
	fi
	stop_daemons
	install_packages
	write_cell
	(cd / && q sge_qmaster)
	for _ in $(seq 200); do q qstat >/dev/null 2>&1 && break; sleep 0.1; done
	q qstat >/dev/null 2>&1 || die "sge_qmaster did not come up; see $dir/spool/qmaster/messages"
	configure
	(cd / && q sge_execd)
	local host state=""
	host=$(hostname)
	# Up once the queue instance has no state flag and reports a load.
	for _ in $(seq 300); do
		state=$(q qstat -f -q "all.q@$host" 2>/dev/null | awk -v q="all.q@$host" '$1 == q {print $4 "|" $6}')
		case "$state" in
		[0-9]*"|") break ;;
		esac
		sleep 0.1
	done
	case "$state" in
	[0-9]*"|") ;;
	*) die "sge_execd did not come up (queue state '$state'); see $dir/spool/execd/*/messages" ;;
	esac
	echo "sge-local: up ($host, $slots slots, $gpus fake GPUs); run: eval \"\$($0 env)\""
}

stop_daemons() {
	local name file pid
	for name in sge_execd sge_qmaster; do
		if [ "$name" = sge_execd ]; then file=$(execd_pid) || continue; else file=$qmaster_pid; fi
		alive "$name" "$file" || continue
		pid=$(cat "$file")
		kill -TERM "$pid"
		for _ in $(seq 300); do alive "$name" "$file" || break; sleep 0.1; done
		alive "$name" "$file" && kill -KILL "$pid"
	done
	return 0
}

stop() {
	if qmaster_up; then
		q qdel -f -u '*' >/dev/null 2>&1 || true
		# The jobs are gone once the execd's shepherds are.
		local f pid
		if f=$(execd_pid) && alive sge_execd "$f"; then
			pid=$(cat "$f")
			for _ in $(seq 100); do pgrep -P "$pid" -x sge_shepherd >/dev/null || break; sleep 0.1; done
			# A shepherd still there: kill its job's process group.
			for s in $(pgrep -P "$pid" -x sge_shepherd || true); do
				for j in $(pgrep -P "$s" || true); do kill -KILL -- "-$j" 2>/dev/null || true; done
			done
		fi
	fi
	stop_daemons
}

# wait_job JOBID [TIMEOUT]: poll until the job has left the queue, failing
# at once on an error state (Eqw), then judge every task by its last
# accounting record; 0 iff each has failed=0 and exit_status=0.
wait_job() {
	local job=${1%%.*} timeout=${2:-600} deadline state=""
	deadline=$((SECONDS + timeout))
	while ((SECONDS < deadline)); do
		state=$(q qstat 2>/dev/null | awk -v j="$job" '$1 == j {print $5}' | sort -u | tr '\n' ' ')
		case "$state" in
		*E*) echo "sge-local: job $job in an error state: $state" >&2; q qstat -j "$job" 2>/dev/null | grep -i error >&2 || true; return 1 ;;
		"") break ;;
		esac
		sleep 0.25
	done
	if [ -n "$state" ]; then
		echo "sge-local: job $job still not done after ${timeout}s" >&2
		return 2
	fi
	local acct
	for _ in $(seq 40); do
		acct=$(q qacct -j "$job" 2>/dev/null) && break
		sleep 0.25 # accounting is written a moment after the job leaves qstat
	done
	[ -n "$acct" ] || die "job $job: no accounting record"
	awk '
		$1 == "taskid" { task = $2 }
		$1 == "failed" { failed[task] = $2 }
		$1 == "exit_status" { status[task] = $2 }
		END {
			bad = 0
			for (t in status) {
				print t, "failed=" failed[t], "exit_status=" status[t]
				if (failed[t] != 0 || status[t] != 0) bad = 1
			}
			exit bad
		}' <<<"$acct"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status)
	qmaster_up && echo "sge-local: sge_qmaster runs" || echo "sge-local: sge_qmaster does not run"
	execd_up && echo "sge-local: sge_execd runs" || echo "sge-local: sge_execd does not run"
	qmaster_up && execd_up
	;;
env) echo "export SGE_ROOT=$dir SGE_CELL=default SGE_QMASTER_PORT=$port SGE_EXECD_PORT=$((port + 1)) PATH=$dir/bin/lx-amd64:\$PATH" ;;
wait) shift; [ $# -ge 1 ] || die "usage: $0 wait JOBID [TIMEOUT_S]"; wait_job "$@" ;;
*) die "usage: $0 start|stop|status|env|wait JOBID [TIMEOUT_S]" ;;
esac
