#!/usr/bin/env bash
# tests/slurm/cluster.sh - a throwaway, single-node Slurm cluster in a directory.
#
# Usage:
#   tests/slurm/cluster.sh check        exit 0 if the daemons and clients (munged,
#                                       slurmctld, slurmd, sbatch, sinfo, squeue, ...)
#                                       are installed and we are root, else say why
#                                       and exit 1 (tests can skip on that)
#   tests/slurm/cluster.sh start DIR    create DIR (must be empty or absent), write a
#                                       munge key + slurm.conf there, start munged,
#                                       slurmctld and slurmd, wait until the node is idle
#   tests/slurm/cluster.sh env DIR      print the shell exports clients need
#                                       (eval "$(tests/slurm/cluster.sh env DIR)")
#   tests/slurm/cluster.sh stop DIR     cancel remaining jobs and stop the daemons
#                                       recorded in DIR/*.pid (idempotent)
#
# Everything (key, sockets, state, spool, logs, pid files) lives in DIR, so the
# cluster does not touch /etc/slurm, /etc/munge, /run or /var and several clusters
# can exist one after another (or side by side: ports are picked free).
#
# Debian packages: slurmctld slurmd slurm-client munge (Slurm 22.05, munge 0.5.15
# on bookworm). Meant to run as root (slurmd must be root to launch jobs).
#
# Environment knobs (all optional):
#   CLUSTER_START_TIMEOUT   seconds to wait for the node to become idle (default 30)
#   CLUSTER_STOP_TIMEOUT    seconds to wait for the daemons to exit (default 15)
#   CLUSTER_PORT            first port to try for slurmctld (default 16817); slurmd
#                           gets the next free one

set -euo pipefail

# The daemons live in sbin, which a non-login or non-root PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

readonly REQUIRED_BINS=(munged munge slurmctld slurmd slurmstepd sbatch sinfo squeue scancel)
readonly DAEMONS=(munged slurmctld slurmd)
readonly START_TIMEOUT="${CLUSTER_START_TIMEOUT:-30}"
readonly STOP_TIMEOUT="${CLUSTER_STOP_TIMEOUT:-15}"

log() { echo "cluster.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '4,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# ---------------------------------------------------------------------------
# helpers

# Absolute path of $1 without requiring it to exist.
abspath() {
    case "$1" in
        /*) printf '%s\n' "$1" ;;
        *) printf '%s/%s\n' "$PWD" "$1" ;;
    esac
}

missing_bins() {
    local b
    for b in "${REQUIRED_BINS[@]}"; do
        command -v "$b" >/dev/null 2>&1 || printf '%s\n' "$b"
    done
}

# True if TCP port $1 is in LISTEN state on any local address (IPv4 or IPv6).
port_in_use() {
    local hex
    hex=$(printf '%04X' "$1")
    # /proc/net/tcp columns: sl local_address rem_address st ...; st 0A = LISTEN
    awk -v p=":$hex" '$2 ~ p"$" && $4 == "0A" { found = 1 } END { exit !found }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# Print the first port >= $1 that is not listening and differs from $2.
free_port() {
    local port=$1 avoid=${2:-0}
    while port_in_use "$port" || [ "$port" = "$avoid" ]; do
        port=$((port + 1))
        [ "$port" -lt 65000 ] || die "no free TCP port found"
    done
    printf '%s\n' "$port"
}

# PID recorded in DIR/NAME.pid, if that process is alive, really is NAME and
# was started for DIR (its command line names a path inside DIR).
live_pid() {
    local dir=$1 name=$2 pid comm
    [ -r "$dir/$name.pid" ] || return 1
    pid=$(tr -dc '0-9' <"$dir/$name.pid")
    [ -n "$pid" ] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [ "$comm" = "$name" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$dir/" || return 1
    printf '%s\n' "$pid"
}

# Wait up to $2 seconds for file $1 to exist and be non-empty.
wait_file() {
    local f=$1 t=$(( $2 * 10 ))
    while [ "$t" -gt 0 ]; do
        [ -s "$f" ] && return 0
        sleep 0.1
        t=$((t - 1))
    done
    return 1
}

# Print the last lines of every log in DIR to stderr.
dump_logs() {
    local dir=$1 f
    for f in "$dir"/log/*.log; do
        [ -e "$f" ] || continue
        echo "----- tail of $f -----" >&2
        tail -n 30 "$f" >&2 || true
    done
}

# Called when start fails: show logs, stop what was started, exit non-zero.
start_failed() {
    local dir=$1; shift
    log "error: $*"
    dump_logs "$dir"
    do_stop "$dir" || true
    die "cluster in $dir did not start"
}

# ---------------------------------------------------------------------------
# check

do_check() {
    local missing
    missing=$(missing_bins | tr '\n' ' ')
    if [ -n "$missing" ]; then
        echo "cluster.sh: missing binaries: $missing" >&2
        echo "cluster.sh: install with: apt-get install -y slurmctld slurmd slurm-client munge" >&2
        return 1
    fi
    # slurmctld (SlurmUser=root) and slurmd (which setuid()s to job users) need root.
    if [ "$(id -u)" -ne 0 ]; then
        echo "cluster.sh: must run as root (uid is $(id -u))" >&2
        return 1
    fi
    return 0
}

# ---------------------------------------------------------------------------
# start

write_slurm_conf() {
    local dir=$1 node=$2 ctld_port=$3 slurmd_port=$4
    local cpus mem_total_mb real_mem
    cpus=$(nproc)
    mem_total_mb=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
    # Leave a margin (10%, at least 512 MB) so slurmd never finds less memory than
    # configured (that would drain the node with "Low RealMemory").
    real_mem=$(( mem_total_mb - (mem_total_mb / 10 > 512 ? mem_total_mb / 10 : 512) ))
    [ "$real_mem" -ge 256 ] || real_mem=256

    cat >"$dir/slurm.conf" <<EOF
# Generated by tests/slurm/cluster.sh - single-node test cluster, everything in $dir
ClusterName=testcluster
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root

# Authentication through our own munged (clients read this file too).
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket

# No cgroups, no accounting, no MPI, no mail.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
PlugStackConfig=$dir/plugstack.conf

# Scheduling: individual CPUs and memory are consumable.
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
# Take the configured node size as truth (no drain on small hardware mismatches).
SlurmdParameters=config_overrides
ReturnToService=2
# Jobs that give no --mem get an equal share of the node per CPU (the default
# would be the whole node, which serialises everything).
DefMemPerCPU=$(( real_mem / cpus ))
# Schedule right after submissions and completions (defaults delay up to 3 s).
SchedulerParameters=batch_sched_delay=0,sched_min_interval=100000
# Short timeouts: this is a test cluster.
KillWait=5
# MinJobAge <= 5 makes 'sbatch --wait' poll every 2 s (with larger values it backs
# off to 8 s and then 32 s); finished jobs stay visible for 5 s to 65 s.
MinJobAge=5

# State, spool, logs and pids all under $dir.
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldDebug=info
SlurmdDebug=info

NodeName=$node NodeHostname=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$real_mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
    # An empty SPANK plugin stack (instead of /etc/slurm/plugstack.conf).
    : >"$dir/plugstack.conf"
}

do_start() {
    local dir=$1 node ctld_port slurmd_port pid state t

    do_check || die "cannot start a Slurm cluster here"

    # DIR ends up unquoted in slurm.conf: keep to plain path characters.
    case "$dir" in
        *[!A-Za-z0-9._/+-]*) die "DIR may only contain A-Z a-z 0-9 . _ / + - : $dir" ;;
    esac
    # Unix socket paths are limited to 108 bytes; slurmd puts sockets in its spool.
    [ "${#dir}" -le 70 ] || die "DIR path too long for unix sockets (${#dir} > 70 chars): $dir"
    if [ -e "$dir" ]; then
        [ -d "$dir" ] || die "$dir exists and is not a directory"
        [ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
    fi
    mkdir -p "$dir"
    # munged refuses group/other-writable directories along its paths.
    chmod 0755 "$dir"
    mkdir -p "$dir/munge" "$dir/log" "$dir/state" "$dir/spool/slurmd"
    chmod 0700 "$dir/munge"

    node=$(hostname -s)
    ctld_port=$(free_port "${CLUSTER_PORT:-16817}")
    slurmd_port=$(free_port $((ctld_port + 1)) "$ctld_port")
    write_slurm_conf "$dir" "$node" "$ctld_port" "$slurmd_port"

    # --- munged with a fresh key -------------------------------------------
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1 count=1024 status=none
    chmod 0400 "$dir/munge/munge.key"
    # --force: munged refuses a socket below a directory that is not searchable
    # by everyone (e.g. DIR inside a 0700 'mktemp -d' directory). All clients of
    # this cluster run as root, so that is fine; --force turns it into a warning.
    munged --force \
        --socket="$dir/munge.socket" \
        --key-file="$dir/munge/munge.key" \
        --pid-file="$dir/munged.pid" \
        --log-file="$dir/log/munged.log" \
        --seed-file="$dir/munge/munged.seed" \
        || start_failed "$dir" "munged failed to start"
    wait_file "$dir/munged.pid" 10 || start_failed "$dir" "munged wrote no pid file"
    # Round-trip a credential to prove the socket works.
    t=50
    until munge -n -S "$dir/munge.socket" 2>/dev/null \
            | unmunge -S "$dir/munge.socket" >/dev/null 2>&1; do
        t=$((t - 1))
        [ "$t" -gt 0 ] || start_failed "$dir" "munge socket $dir/munge.socket not answering"
        sleep 0.1
    done

    # --- slurmctld and slurmd (both daemonize and write their pid files) ----
    export SLURM_CONF="$dir/slurm.conf"
    slurmctld -f "$dir/slurm.conf" || start_failed "$dir" "slurmctld failed to start"
    wait_file "$dir/slurmctld.pid" 15 || start_failed "$dir" "slurmctld wrote no pid file"
    slurmd -f "$dir/slurm.conf" -N "$node" || start_failed "$dir" "slurmd failed to start"
    wait_file "$dir/slurmd.pid" 15 || start_failed "$dir" "slurmd wrote no pid file"

    # --- wait until the node is idle ----------------------------------------
    t=$(( START_TIMEOUT * 5 ))
    while :; do
        for d in "${DAEMONS[@]}"; do
            live_pid "$dir" "$d" >/dev/null || start_failed "$dir" "$d died during startup"
        done
        state=$(sinfo -h -N -n "$node" -o '%t' 2>/dev/null || true)
        [ "$state" = "idle" ] && break
        t=$((t - 1))
        [ "$t" -gt 0 ] || start_failed "$dir" \
            "node $node not idle after ${START_TIMEOUT}s (state: '${state:-no answer}')"
        sleep 0.2
    done
    log "cluster up in $dir (node $node, slurmctld port $ctld_port, slurmd port $slurmd_port)"
}

# ---------------------------------------------------------------------------
# stop

# PIDs of all descendants of process $1 (children first level, then deeper).
descendants() {
    ps -eo pid=,ppid= | awk -v root="$1" '
        { parent[$1] = $2 }
        END {
            want[root] = 1
            do {                      # grow the set until no new child is found
                added = 0
                for (p in parent)
                    if ((parent[p] in want) && !(p in want)) { want[p] = 1; added = 1 }
            } while (added)
            for (p in want) if (p != root) print p
        }'
}

# Normally jobs are cancelled before the daemons stop. If slurmctld was already
# gone, slurmstepd processes (and the job processes below them) can outlive
# slurmd: kill those of this cluster. They are recognised by keeping the slurmd
# log (inside DIR) open, which tells them apart from other clusters' steps.
kill_stray_stepds() {
    local dir=$1 p fd pid
    for p in /proc/[0-9]*; do
        [ "$(cat "$p/comm" 2>/dev/null)" = "slurmstepd" ] || continue
        pid=${p#/proc/}
        for fd in "$p"/fd/*; do
            case "$(readlink "$fd" 2>/dev/null)" in
                "$dir"/*)
                    log "killing leftover slurmstepd $pid and its job processes"
                    # Stop the step first so it cannot respawn or reap, then its tree.
                    kill -STOP "$pid" 2>/dev/null || true
                    # shellcheck disable=SC2046
                    kill -KILL $(descendants "$pid") 2>/dev/null || true
                    kill -KILL "$pid" 2>/dev/null || true
                    break ;;
            esac
        done
    done
}

do_stop() {
    local dir=$1 name pid t jobs
    [ -d "$dir" ] || return 0

    # Cancel jobs still queued or running, so that no job processes outlive us.
    if live_pid "$dir" slurmctld >/dev/null && [ -r "$dir/slurm.conf" ]; then
        jobs=$(SLURM_CONF="$dir/slurm.conf" timeout 10 squeue -h -o '%A' 2>/dev/null || true)
        if [ -n "$jobs" ]; then
            # shellcheck disable=SC2086
            SLURM_CONF="$dir/slurm.conf" timeout 10 scancel $jobs 2>/dev/null || true
            t=50
            while [ "$t" -gt 0 ] && [ -n "$(SLURM_CONF="$dir/slurm.conf" \
                    timeout 10 squeue -h -o '%A' 2>/dev/null || true)" ]; do
                sleep 0.2
                t=$((t - 1))
            done
        fi
    fi

    # SIGTERM all recorded daemons at once (each takes 1-2 s to exit), then wait;
    # whatever still runs after STOP_TIMEOUT gets SIGKILL.
    local -A pids=()
    for name in "${DAEMONS[@]}"; do
        pid=$(live_pid "$dir" "$name") || continue
        pids[$name]=$pid
        kill -TERM "$pid" 2>/dev/null || true
    done
    t=$(( STOP_TIMEOUT * 10 ))
    while :; do
        for name in "${!pids[@]}"; do
            [ "$(cat "/proc/${pids[$name]}/comm" 2>/dev/null)" = "$name" ] || unset "pids[$name]"
        done
        [ "${#pids[@]}" -gt 0 ] || break
        t=$((t - 1))
        if [ "$t" -le 0 ]; then
            for name in "${!pids[@]}"; do
                log "warning: $name (pid ${pids[$name]}) ignored SIGTERM, sending SIGKILL"
                kill -KILL "${pids[$name]}" 2>/dev/null || true
            done
            sleep 0.2
            break
        fi
        sleep 0.1
    done
    kill_stray_stepds "$dir"
    rm -f "$dir"/munged.pid "$dir"/slurmctld.pid "$dir"/slurmd.pid
}

# ---------------------------------------------------------------------------
# env

do_env() {
    local dir=$1
    [ -r "$dir/slurm.conf" ] || die "no cluster config at $dir/slurm.conf"
    # The munge socket is named in slurm.conf (AuthInfo=socket=...), which sbatch,
    # sinfo, squeue, scancel etc. read via SLURM_CONF; nothing else is needed.
    printf 'export SLURM_CONF=%q\n' "$dir/slurm.conf"
}

# ---------------------------------------------------------------------------

main() {
    [ $# -ge 1 ] || usage
    local cmd=$1; shift
    case "$cmd" in
        check)
            [ $# -eq 0 ] || usage
            do_check ;;
        start|stop|env)
            if [ $# -ne 1 ] || [ -z "$1" ]; then usage; fi
            local dir
            dir=$(abspath "$1")
            dir=${dir%/}
            "do_$cmd" "$dir" ;;
        -h|--help|help) usage ;;
        *) usage ;;
    esac
}

main "$@"
