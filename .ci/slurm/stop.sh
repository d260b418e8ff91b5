#!/usr/bin/env bash
# Stops what .ci/slurm/start.sh started (by its pid files): slurmd, slurmctld, and munged if it started it.
S=${1:-/tmp/interp-init-slurm}
for f in "$S/slurmd.pid" "$S/slurmctld.pid"; do [[ -f $f ]] && kill "$(cat "$f")" 2>/dev/null; done
if [[ -f "$S/started-munged" && -f /run/munge/munged.pid ]]; then
    kill "$(cat /run/munge/munged.pid)" 2>/dev/null
    rm -f "$S/started-munged"
fi
exit 0
