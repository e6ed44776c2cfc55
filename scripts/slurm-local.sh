#!/usr/bin/env bash
# slurm-local.sh: a real single-node Slurm on this machine, for trying
# nodepack against Slurm on a workstation and for CI. No systemd, no
# cgroups, nothing written outside one directory (SLURM_LOCAL_DIR).
#
#   scripts/slurm-local.sh start        install (apt) if needed, start munged, slurmctld, slurmd
#   scripts/slurm-local.sh env          print "export SLURM_CONF=…" for eval
#   scripts/slurm-local.sh wait JOBID [TIMEOUT_S]
#                                       wait until the job (every array task) has ended;
#                                       exit 0 only if all of them COMPLETED
#   scripts/slurm-local.sh stop         cancel jobs, stop the daemons by their pid files
#
# Knobs (environment): SLURM_LOCAL_DIR (/tmp/nodepack-slurm), SLURM_LOCAL_GPUS
# (fake GPUs as GRES, 4), SLURM_LOCAL_KILLWAIT (30), SLURM_LOCAL_CRED_EXPIRE
# (120; a requeued job waits this long), SLURM_LOCAL_PORT (6817; slurmd uses
# the next port). Must run as root. Every command is idempotent.
set -euo pipefail

dir=${SLURM_LOCAL_DIR:-/tmp/nodepack-slurm}
gpus=${SLURM_LOCAL_GPUS:-4}
killwait=${SLURM_LOCAL_KILLWAIT:-30}
cred_expire=${SLURM_LOCAL_CRED_EXPIRE:-120}
port=${SLURM_LOCAL_PORT:-6817}
conf=$dir/etc/slurm.conf
export SLURM_CONF=$conf

die() { echo "slurm-local: $*" >&2; exit 1; }

# alive NAME: the daemon whose pid file is $dir/run/NAME.pid runs, and the
# pid is really that daemon (pids are reused).
alive() {
	local pid
	pid=$(cat "$dir/run/$1.pid" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ]
}

install_packages() {
	command -v slurmctld >/dev/null && command -v slurmd >/dev/null &&
		command -v sbatch >/dev/null && command -v munged >/dev/null && return
	[ "$(id -u)" = 0 ] || die "need root to install slurm"
	apt-get update -qq
	# policy-rc.d keeps the packages' own services from starting.
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		slurmctld slurmd slurm-client munge >/dev/null
}

write_config() {
	local node hw cpus mem
	node=$(hostname -s)
	# slurmd -C prints this machine's real layout: CPUs, sockets, cores, memory.
	hw=$(slurmd -C | head -n 1 | sed 's/ UpTime=.*//')
	cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
	mem=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
	mkdir -p "$dir"/{etc,state,spool,log,run,munge,dev}
	chmod 700 "$dir/munge"
	local gres=""
	if [ "$gpus" -gt 0 ]; then
		gres=" Gres=gpu:$gpus"
		# Slurm sets CUDA_VISIBLE_DEVICES only for character devices: symlinks
		# to /dev/null are fake GPUs that need nothing written under /dev.
		for ((i = 0; i < gpus; i++)); do ln -sfn /dev/null "$dir/dev/nvidia$i"; done
		cat >"$dir/etc/gres.conf" <<-GRES
			AutoDetect=off
			NodeName=$node Name=gpu File=$dir/dev/nvidia[0-$((gpus - 1))]
		GRES
	else
		: >"$dir/etc/gres.conf"
	fi
	cat >"$conf" <<-CONF
		# written by nodepack's scripts/slurm-local.sh: one node, no systemd, no cgroups
		ClusterName=nodepack
		SlurmctldHost=$node(127.0.0.1)
		SlurmctldPort=$port
		SlurmdPort=$((port + 1))
		SlurmUser=root
		AuthType=auth/munge
		CredType=cred/munge
		AuthInfo=socket=$dir/munge/munge.socket.2,cred_expire=$cred_expire
		StateSaveLocation=$dir/state
		SlurmdSpoolDir=$dir/spool
		SlurmctldPidFile=$dir/run/slurmctld.pid
		SlurmdPidFile=$dir/run/slurmd.pid
		SlurmctldLogFile=$dir/log/slurmctld.log
		SlurmdLogFile=$dir/log/slurmd.log
		ProctrackType=proctrack/linuxproc
		TaskPlugin=task/affinity
		SelectType=select/cons_tres
		SelectTypeParameters=CR_Core_Memory
		DefMemPerCPU=$((mem / cpus))
		SchedulerType=sched/backfill
		SchedulerParameters=batch_sched_delay=0,sched_interval=5
		MpiDefault=none
		SwitchType=switch/none
		JobAcctGatherType=jobacct_gather/none
		AccountingStorageType=accounting_storage/none
		JobCompType=jobcomp/none
		MailProg=/bin/true
		ReturnToService=2
		EnforcePartLimits=ALL
		KillWait=$killwait
		MinJobAge=300
		GresTypes=gpu
		$hw$gres State=UNKNOWN
		PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
	CONF
}

start() {
	[ "$(id -u)" = 0 ] || die "must run as root"
	if alive munged && alive slurmctld && alive slurmd; then
		return 0
	fi
	stop_daemons
	install_packages
	rm -rf "$dir/state" "$dir/spool"
	write_config
	if [ ! -s "$dir/munge/munge.key" ]; then
		head -c 1024 /dev/urandom >"$dir/munge/munge.key"
		chmod 400 "$dir/munge/munge.key"
	fi
	munged --force --socket="$dir/munge/munge.socket.2" --key-file="$dir/munge/munge.key" \
		--pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
	slurmctld -f "$conf"
	for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
	scontrol ping | grep -q UP || die "slurmctld did not come up; see $dir/log/slurmctld.log"
	slurmd -f "$conf"
	for _ in $(seq 100); do sinfo -h -o %T 2>/dev/null | grep -qx idle && break; sleep 0.1; done
	sinfo -h -o %T | grep -qx idle || die "slurmd did not come up; see $dir/log/slurmd.log"
	echo "slurm-local: up ($(sinfo -h -o '%N %c CPUs %G')); run: eval \"\$($0 env)\""
}

stop_daemons() {
	local name pid
	for name in slurmd slurmctld munged; do
		alive "$name" || continue
		pid=$(cat "$dir/run/$name.pid")
		kill -TERM "$pid"
		for _ in $(seq 150); do alive "$name" || break; sleep 0.1; done
		alive "$name" && kill -KILL "$pid"
	done
	return 0
}

stop() {
	if alive slurmctld; then
		scancel --full --quiet --signal=KILL --user=root 2>/dev/null || true
		# Jobs leave COMPLETING only when their processes are gone.
		for _ in $(seq 300); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
	fi
	stop_daemons
}

# wait_job JOBID [TIMEOUT]: poll until every record of the job (every array
# task) is in a final state and none is COMPLETING; 0 iff all COMPLETED.
wait_job() {
	local job=$1 timeout=${2:-600} states deadline
	deadline=$((SECONDS + timeout))
	while ((SECONDS < deadline)); do
		states=$(scontrol -o show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p') ||
			die "job $job: unknown (gone after MinJobAge?)"
		[ -n "$states" ] || die "job $job: unknown"
		if ! grep -qE 'PENDING|RUNNING|COMPLETING|CONFIGURING|SUSPENDED|REQUEUE|RESIZING|SIGNALING|STAGE_OUT' <<<"$states"; then
			if grep -qvx COMPLETED <<<"$states"; then
				echo "slurm-local: job $job ended: $(sort <<<"$states" | uniq -c | tr -s ' \n' ' ')" >&2
				return 1
			fi
			return 0
		fi
		sleep 0.5
	done
	echo "slurm-local: job $job still not done after ${timeout}s" >&2
	return 2
}

case "${1:-}" in
start) start ;;
stop) stop ;;
env) echo "export SLURM_CONF=$conf" ;;
wait) shift; [ $# -ge 1 ] || die "usage: $0 wait JOBID [TIMEOUT_S]"; wait_job "$@" ;;
*) die "usage: $0 start|stop|env|wait JOBID [TIMEOUT_S]" ;;
esac
