#!/usr/bin/env bash
# A single-node Slurm on this machine (as root), for the cluster tests: Debian's slurm-wlm and
# munge, its state under one folder.  Usage: .ci/slurm/start.sh [STATE_DIR]
# Environment: SLURM_MAXTIME_MIN (the partition's time limit, minutes; default 1, so that a
# test run longer than a chunk is requeued), SLURM_CRED_EXPIRE_S (how long a requeued job
# waits before it may start again; Slurm's default is 120 s, 5 s at least).
# Prints `sinfo` once the node is idle; stop with .ci/slurm/stop.sh STATE_DIR.
# Writes /etc/slurm/slurm.conf (a machine that runs a Slurm of its own should not run this).
set -euo pipefail
S=${1:-/tmp/interp-init-slurm}
if ! command -v slurmctld >/dev/null; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq slurm-wlm munge >/dev/null
fi
H=$(hostname)
mkdir -p "$S"/{state,spool,log} /etc/slurm /run/munge
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=local
SlurmctldHost=$H
AuthType=auth/munge
AuthInfo=cred_expire=${SLURM_CRED_EXPIRE_S:-5}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=5
MinJobAge=600
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldLogFile=$S/log/ctld.log
SlurmdLogFile=$S/log/d.log
SlurmUser=root
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
NodeName=$H CPUs=$(nproc) RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=${SLURM_MAXTIME_MIN:-1} State=UP
CONF
[[ -s /etc/munge/munge.key ]] || mungekey -c -f
chown munge:munge /etc/munge/munge.key /run/munge
if ! pgrep -x munged >/dev/null; then
    su -s /bin/sh munge -c /usr/sbin/munged
    touch "$S/started-munged"  # stop.sh stops it again
fi
slurmctld -c
sleep 2
slurmd -c
for _ in $(seq 1 30); do sinfo -h -o "%P %a %t" 2>/dev/null | grep -q idle && break; sleep 1; done
sinfo
