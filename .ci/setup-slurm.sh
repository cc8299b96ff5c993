#!/usr/bin/env bash
# Prepare a Debian bookworm CI host (root) for the Slurm tests of specsweep:
#   1. install munge and slurm-wlm (Debian's Slurm 22.05: slurmctld, slurmd,
#      the client commands);
#   2. write a single-node slurm.conf: slurmctld and slurmd on this host,
#      select/cons_tres, no accounting database, one partition `specsweep`
#      holding one CPU node sized from `slurmd -C` (this host's real cores and
#      memory, so every job the profile asks for fits), and a job completion
#      log (jobcomp/filetxt): the scheduler's own record of every job that
#      ended, which the tests read back;
#   3. start munged, slurmctld and slurmd, then wait until `sinfo` shows the
#      node idle and `srun hostname` runs a job.
# Idempotent: a second run with the daemons up and the same slurm.conf only
# checks; a changed slurm.conf restarts the daemons started here. Every step
# fails loudly: a CI job that cannot run Slurm must fail, not skip.
#
# Environment: LOG_DIR (default /var/log/specsweep), SLURM_WAIT_S (default 60),
# PARTITION (default specsweep; profiles/slurm/config.yaml names it).
set -euo pipefail

LOG_DIR="${LOG_DIR:-/var/log/specsweep}"
SLURM_WAIT_S="${SLURM_WAIT_S:-60}"
PARTITION="${PARTITION:-specsweep}"
CONF=/etc/slurm/slurm.conf
CGROUP_CONF=/etc/slurm/cgroup.conf
STATE_DIR=/var/lib/slurm/slurmctld
SPOOL_DIR=/var/lib/slurm/slurmd
JOBCOMP_LOG="$LOG_DIR/slurm-jobcomp.log"

log() { echo "[setup-slurm] $*" >&2; }
die() { echo "[setup-slurm] ERROR: $*" >&2; exit 1; }
trap 'die "failed at line $LINENO: $BASH_COMMAND"' ERR

[[ "$(id -u)" -eq 0 ]] || die "must run as root (installs packages, starts munged, slurmctld, slurmd)"
mkdir -p "$LOG_DIR"

# 1. packages ---------------------------------------------------------------
need=()
for pkg in munge slurm-wlm; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if [[ ${#need[@]} -gt 0 ]]; then
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${need[@]}"
fi
for exe in munged slurmctld slurmd sinfo srun sbatch squeue scontrol scancel; do
    command -v "$exe" >/dev/null || die "$exe not found after installing munge slurm-wlm"
done

# Stop a daemon this script started (pid file under LOG_DIR), and only that one.
stop_ours() {
    local name="$1" pidfile="$LOG_DIR/$1.pid"
    [[ -f "$pidfile" ]] || return 0
    local pid
    pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
        log "stopping $name (pid $pid)"
        kill "$pid"
        for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -0 "$pid" 2>/dev/null && die "$name (pid $pid) did not stop"
    fi
    rm -f "$pidfile"
}

# Alive and still that daemon: a pid file outlives its process, and on a long-lived machine the pid is reused.
running() { [[ -f "$LOG_DIR/$1.pid" ]] && [[ "$(cat "/proc/$(cat "$LOG_DIR/$1.pid")/comm" 2>/dev/null)" == "$1" ]]; }

# 2. munge ------------------------------------------------------------------
[[ -s /etc/munge/munge.key ]] || { log "creating /etc/munge/munge.key"; mungekey --create --force; }
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    log "munged already answering"
else
    log "starting munged (log: $LOG_DIR/munged.log)"
    # munged refuses to run as root; setpriv execs it as munge (no wrapper
    # process), and --foreground keeps the recorded pid munged's own.
    nohup setpriv --reuid=munge --regid=munge --init-groups munged --foreground --log-file="$LOG_DIR/munged.log" \
        >>"$LOG_DIR/munged.out" 2>&1 &
    echo $! > "$LOG_DIR/munged.pid"
    for _ in $(seq 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
    munge -n | unmunge >/dev/null || { tail -n 20 "$LOG_DIR/munged.out" "$LOG_DIR/munged.log" >&2 || true; die "munge credential round trip fails"; }
fi

# 3. slurm.conf ---------------------------------------------------------------
# The node line from slurmd's own view of the hardware (CPUs, sockets, cores,
# threads, RealMemory): a node configured larger than it is would be drained.
node_line="$(slurmd -C | head -n 1)"
[[ "$node_line" == NodeName=* ]] || die "slurmd -C printed no node line: $node_line"
node="$(sed -E 's/^NodeName=([^ ]+).*/\1/' <<<"$node_line")"
[[ "$node" == "$(hostname -s)" ]] || die "slurmd -C names node $node, hostname -s says $(hostname -s)"

install -d -o slurm -g slurm -m 0755 "$STATE_DIR" "$SPOOL_DIR"
touch "$JOBCOMP_LOG" && chown slurm:slurm "$JOBCOMP_LOG"

new_conf="$(mktemp)"
cat > "$new_conf" <<EOF
# Written by specsweep's .ci/setup-slurm.sh: a single-node cluster for CI.
ClusterName=specsweep-ci
SlurmctldHost=${node}(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=${SPOOL_DIR}
StateSaveLocation=${STATE_DIR}
SlurmctldLogFile=${LOG_DIR}/slurmctld.log
SlurmdLogFile=${LOG_DIR}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# Processes of a job are tracked by cgroup, as on production clusters: scancel
# reaches every process of the job, including a server in its own session.
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# No slurmdbd: no accounting storage, so no sacct. The job completion log is
# the scheduler's own record of finished jobs (one line per job).
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=${JOBCOMP_LOG}
# Finished jobs stay visible to squeue/scontrol this long (the executor
# plugin's squeue status command needs them).
MinJobAge=300
KillWait=30
${node_line% UpTime=*} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=${PARTITION} Nodes=${node} Default=YES MaxTime=INFINITE State=UP
EOF
new_cgroup="$(mktemp)"
cat > "$new_cgroup" <<EOF
# Written by specsweep's .ci/setup-slurm.sh (process tracking only).
CgroupPlugin=autodetect
CgroupMountpoint=/sys/fs/cgroup
EOF

changed=0
if ! cmp -s "$new_conf" "$CONF"; then install -m 0644 "$new_conf" "$CONF"; changed=1; fi
if ! cmp -s "$new_cgroup" "$CGROUP_CONF"; then install -m 0644 "$new_cgroup" "$CGROUP_CONF"; changed=1; fi
rm -f "$new_conf" "$new_cgroup"
if [[ $changed -eq 1 ]]; then
    log "wrote $CONF and $CGROUP_CONF"
    stop_ours slurmd
    stop_ours slurmctld
fi

# 4. daemons ------------------------------------------------------------------
start_daemon() {
    local name="$1"; shift
    if running "$name"; then
        log "$name already running (pid $(cat "$LOG_DIR/$name.pid"))"
        return 0
    fi
    pgrep -x "$name" >/dev/null && die "a $name not started by this script is running; stop it first"
    log "starting $name (log: $LOG_DIR/$name.log)"
    nohup "$name" -D "$@" >>"$LOG_DIR/$name.out" 2>&1 &
    echo $! > "$LOG_DIR/$name.pid"
}

start_daemon slurmctld
for _ in $(seq "$SLURM_WAIT_S"); do scontrol ping 2>/dev/null | grep -q 'is UP' && break
    running slurmctld || { tail -n 30 "$LOG_DIR/slurmctld.out" "$LOG_DIR/slurmctld.log" >&2 || true; die "slurmctld exited"; }
    sleep 1
done
scontrol ping | grep -q 'is UP' || { tail -n 30 "$LOG_DIR/slurmctld.log" >&2 || true; die "slurmctld does not answer after ${SLURM_WAIT_S}s"; }

start_daemon slurmd
state=""
for _ in $(seq "$SLURM_WAIT_S"); do
    state="$(sinfo --noheader --nodes="$node" --format=%T 2>/dev/null | head -n 1)"
    [[ "$state" == idle || "$state" == mixed || "$state" == allocated ]] && break
    running slurmd || { tail -n 30 "$LOG_DIR/slurmd.out" "$LOG_DIR/slurmd.log" >&2 || true; die "slurmd exited"; }
    sleep 1
done
if [[ "$state" == down* || "$state" == drain* ]]; then
    # A node left down by an earlier run (e.g. this host restarted under a
    # running job) returns to service: its configuration is the one just checked.
    log "node $node is $state; resuming it"
    scontrol update NodeName="$node" State=RESUME
    sleep 2
    state="$(sinfo --noheader --nodes="$node" --format=%T | head -n 1)"
fi
[[ "$state" == idle || "$state" == mixed || "$state" == allocated ]] || {
    tail -n 30 "$LOG_DIR/slurmd.log" "$LOG_DIR/slurmctld.log" >&2 || true
    sinfo -R >&2 || true
    die "node $node is '${state:-unknown}' after ${SLURM_WAIT_S}s, not idle"
}

# 5. a real job -----------------------------------------------------------------
out="$(timeout "$SLURM_WAIT_S" srun --partition="$PARTITION" --ntasks=1 --time=1 hostname)" \
    || die "srun hostname failed (see $LOG_DIR/slurmctld.log, $LOG_DIR/slurmd.log)"
[[ "$out" == "$node" ]] || die "srun hostname printed '$out', expected $node"
log "ready: $(sinfo --version), partition $PARTITION, node $node ($(sed -E 's/.*CPUs=([0-9]+).*RealMemory=([0-9]+).*/\1 CPUs, \2 MB/' <<<"$node_line")), job log $JOBCOMP_LOG"
