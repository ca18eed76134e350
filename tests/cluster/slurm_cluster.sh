#!/usr/bin/env bash
# fedbench's SLURM path on a real one-node SLURM cluster on localhost (issue 42).
#
# Run as root on Debian 12 (`make cluster-test`, or `bash tests/cluster/slurm_cluster.sh`):
#   1. installs the Debian packages slurm-wlm, slurmdbd, munge and mariadb-server (if missing);
#   2. writes slurm.conf (this machine's CPUs and RealMemory, from `slurmd -C`) and slurmdbd.conf
#      (a local MariaDB), starts munged, mariadbd, slurmdbd, slurmctld and slurmd directly (no
#      systemd), registers the cluster, an account and root in sacctmgr, waits for the node to be
#      idle;
#   3. runs `snakemake --profile profiles/slurm quick --config scale=smoke` in a copy of the
#      workflow, every job a SLURM job, and the same grid locally in a second copy, and checks
#      that every metrics.jsonl is byte-identical, that sbatch got the train rule's mem_mb,
#      runtime and threads (read back from sacct), and where the logs land;
#   4. faults (FAULTS=0 skips them), each checked: a) a training job scancel'ed after its first
#      checkpoint, reported, then resumed by --rerun-incomplete byte-identical to an uninterrupted
#      run; b) a job whose memory is overridden tiny and c) one whose runtime is overridden to one
#      minute: stopped by SLURM, the run ending with fedbench's line naming the resource to raise;
#      d) the Snakemake head killed (SIGKILL) mid-grid, its queued jobs cancelled, a restart that
#      trains only the unfinished runs, every metrics.jsonl byte-identical at the end.
# The long jobs come from tests/cluster/slow.yaml (FedAvg with a sleep a round, as a plugin).
# Measured: docs/running.md ("A real SLURM cluster").
# All state (configs, spool, logs, database, the workspaces) lives in /tmp/fedbench-slurm.XXXX;
# every daemon started here is stopped on exit. KEEP_STATE=1 keeps the database and spool too.
set -euo pipefail

T0=$(date +%s)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV_BIN=${VENV_BIN:-$REPO/.venv/bin}
FAULTS=${FAULTS:-1}
PACKAGES=(slurm-wlm slurmdbd munge mariadb-server)

log() { printf '[%4ds] %s\n' "$(($(date +%s) - T0))" "$*"; }
die() { log "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || { echo "run as root (it installs packages and starts daemons)" >&2; exit 2; }
[ -x "$VENV_BIN/snakemake" ] || { echo "no $VENV_BIN/snakemake: run 'make setup' first" >&2; exit 2; }

# --- 1. packages --------------------------------------------------------------------------------
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "${missing[@]}" >/dev/null ||
        { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi
T_INSTALLED=$(date +%s)
log "packages ready ($((T_INSTALLED - T0)) s): ${PACKAGES[*]}"

# --- state folder, daemons and their cleanup ----------------------------------------------------
ST=$(mktemp -d /tmp/fedbench-slurm.XXXX)
chmod 755 "$ST"
mkdir -p "$ST"/{etc,log,run,db,spool/ctld,spool/d,warm}
export SLURM_CONF=$ST/etc/slurm.conf
export FEDBENCH_WARM_DIR=$ST/warm   # the local run's warm worker keeps its sockets here
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLCONFIGDIR=$REPO/.cache/matplotlib XDG_CACHE_HOME=$REPO/.cache
export PATH=$VENV_BIN:$PATH PYTHONPATH=$REPO
log "state in $ST"

declare -a DAEMON_NAMES=() DAEMON_PIDS=()
start_daemon() { # name logfile command... : runs it in the foreground mode, in the background
    local name=$1 out=$2
    shift 2
    "$@" >>"$out" 2>&1 &
    DAEMON_NAMES+=("$name")
    DAEMON_PIDS+=("$!")
    log "started $name (pid $!)"
}

cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    if command -v scancel >/dev/null && [ -f "$SLURM_CONF" ]; then
        timeout 10 scancel --full --user=root >/dev/null 2>&1 # only this cluster's jobs (SLURM_CONF)
    fi
    "$VENV_BIN/python" -c 'from fedbench.worker import shutdown; shutdown()' >/dev/null 2>&1
    local i pid
    for ((i = ${#DAEMON_PIDS[@]} - 1; i >= 0; i--)); do
        pid=${DAEMON_PIDS[i]}
        kill -0 "$pid" 2>/dev/null || continue
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null; fi
        wait "$pid" 2>/dev/null
        echo "stopped ${DAEMON_NAMES[i]} (pid $pid)"
    done
    # slurmd's step daemons of a cancelled job exit on their own; wait for them briefly
    for _ in $(seq 20); do pgrep -f "slurmstepd.*$ST" >/dev/null || break; sleep 0.5; done
    # With proctrack/linuxproc (no cgroups here) a job step's Snakemake can outlive SLURM's kill
    # of its job (seen once after the TIMEOUT of fault c): whatever still runs in the workspaces
    local left
    left=$(pgrep -f -- "$ST/ws-" || true)
    if [ -n "$left" ]; then
        echo "stopping $(wc -w <<<"$left") process(es) left in $ST/ws-*: $(tr '\n' ' ' <<<"$left")"
        kill -TERM $left 2>/dev/null
        sleep 2
        kill -KILL $left 2>/dev/null
    fi
    [ -z "${ETC_LINK:-}" ] || rm -f "$ETC_LINK"
    [ "${KEEP_STATE:-0}" = 1 ] || rm -rf "$ST/db" "$ST/spool" "$ST/run"
    echo "logs and workspaces kept in $ST"
    echo "wall time: $(($(date +%s) - T0)) s (packages: $((${T_INSTALLED:-T0} - T0)) s), exit status $rc"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() { # seconds description command... : retries the command (10 s each) until it succeeds
    local secs=$1 what=$2 end
    shift 2
    end=$(($(date +%s) + secs))
    while [ "$(date +%s)" -lt "$end" ]; do
        if timeout 10 "$@" >"$ST/log/wait.out" 2>&1; then return 0; fi
        sleep 1
    done
    cat "$ST/log/wait.out"
    die "timed out waiting for $what"
}

free_ports() { # n free TCP ports on 127.0.0.1
    "$VENV_BIN/python" - "$1" <<'EOF'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}
read -r CTLD_PORT SLURMD_PORT DBD_PORT MYSQL_PORT < <(free_ports 4)
HOST=$(hostname -s)
# "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"
NODE_LINE=$(slurmd -C | head -1)
CPUS=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
log "node: $NODE_LINE"

# --- 2. munge -----------------------------------------------------------------------------------
MUNGE_SOCKET=$ST/run/munge.socket
dd if=/dev/urandom of="$ST/etc/munge.key" bs=1024 count=1 status=none
chmod 400 "$ST/etc/munge.key"
start_daemon munged "$ST/log/munged.out" munged --foreground --force \
    --key-file="$ST/etc/munge.key" --socket="$MUNGE_SOCKET" --pid-file="$ST/run/munged.pid" \
    --log-file="$ST/log/munged.log" --seed-file="$ST/run/munged.seed"
wait_for 30 munged test -S "$MUNGE_SOCKET"
wait_for 30 "a munge credential" bash -c "munge -S '$MUNGE_SOCKET' -n | unmunge -S '$MUNGE_SOCKET'"

# --- MariaDB ------------------------------------------------------------------------------------
DB_SOCKET=$ST/run/mysqld.sock
DB_PASS=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
mariadb-install-db --no-defaults --user=root --datadir="$ST/db" --skip-test-db \
    --auth-root-authentication-method=socket >"$ST/log/mariadb-install.log" 2>&1 ||
    { cat "$ST/log/mariadb-install.log"; die "mariadb-install-db"; }
start_daemon mariadbd "$ST/log/mariadbd.out" mariadbd --no-defaults --user=root \
    --datadir="$ST/db" --socket="$DB_SOCKET" --pid-file="$ST/run/mysqld.pid" \
    --port="$MYSQL_PORT" --bind-address=127.0.0.1 --skip-name-resolve --skip-log-bin \
    --log-error="$ST/log/mariadb.log" --innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900
wait_for 60 mariadbd mariadb-admin --no-defaults --socket="$DB_SOCKET" -u root ping
mariadb --no-defaults --socket="$DB_SOCKET" -u root <<EOF
CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
FLUSH PRIVILEGES;
EOF

# --- configs ------------------------------------------------------------------------------------
cat >"$ST/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$ST/log/slurmdbd.log
PidFile=$ST/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MYSQL_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
chmod 600 "$ST/etc/slurmdbd.conf"

cat >"$SLURM_CONF" <<EOF
ClusterName=fedbench
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
StateSaveLocation=$ST/spool/ctld
SlurmdSpoolDir=$ST/spool/d
SlurmctldPidFile=$ST/run/slurmctld.pid
SlurmdPidFile=$ST/run/slurmd.pid
SlurmctldLogFile=$ST/log/slurmctld.log
SlurmdLogFile=$ST/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# with slurmdbd, AccountingStoragePass is the munge socket of the connections to slurmdbd
# (AuthInfo's socket is not used for them)
AccountingStoragePass=$MUNGE_SOCKET
AccountingStorageEnforce=associations
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
KillWait=5
InactiveLimit=0
$NODE_LINE NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=fedbench Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

# snakemake-executor-plugin-slurm-jobstep (0.6.1) removes SLURM_CONF (every SLURM_* variable but
# the job's identity) from the environment of the `srun` it runs inside each job, so that srun finds
# the configuration only where a real cluster has it: /etc/slurm/slurm.conf. A link to this one,
# for the duration of the script (refused where a slurm.conf is there already).
if [ -e /etc/slurm/slurm.conf ] || [ -L /etc/slurm/slurm.conf ]; then
    die "/etc/slurm/slurm.conf exists (a SLURM installation of this machine): not replacing it"
fi
mkdir -p /etc/slurm
ln -s "$SLURM_CONF" /etc/slurm/slurm.conf
ETC_LINK=/etc/slurm/slurm.conf

# --- slurmdbd, the accounts, slurmctld, slurmd --------------------------------------------------
start_daemon slurmdbd "$ST/log/slurmdbd.out" slurmdbd -D
wait_for 120 slurmdbd sacctmgr -n list cluster
sacctmgr -i add cluster fedbench >/dev/null
sacctmgr -i add account fedbench Cluster=fedbench Description=fedbench Organization=fedbench >/dev/null
sacctmgr -i add user root Account=fedbench DefaultAccount=fedbench >/dev/null
start_daemon slurmctld "$ST/log/slurmctld.out" slurmctld -D -i
wait_for 60 slurmctld scontrol ping
start_daemon slurmd "$ST/log/slurmd.out" slurmd -D -N "$HOST"
wait_for 120 "the node to be idle" bash -c '[ "$(sinfo -h -N -o %T)" = idle ]'
sinfo
sacctmgr -n -P list association format=Cluster,Account,User
T_CLUSTER=$(date +%s)
log "cluster up ($((T_CLUSTER - T_INSTALLED)) s)"
if [ -n "${PAUSE_FILE:-}" ]; then # debugging: the cluster stays up while this file exists
    echo "export SLURM_CONF=$SLURM_CONF" >"$PAUSE_FILE"
    while [ -e "$PAUSE_FILE" ]; do sleep 1; done
fi

# --- 3. the quick grid at smoke scale under SLURM and locally -----------------------------------
copy_workflow() { # the same copy as tests/workflow_copy.py: Snakefile, workflow/, config, quick.yaml
    "$VENV_BIN/python" - "$1" <<EOF
import sys
from pathlib import Path
sys.path.insert(0, "$REPO/tests")
from workflow_copy import ROOT, copy_workflow
ws = Path(sys.argv[1]); ws.mkdir(parents=True)
copy_workflow(ws, {"quick": ROOT / "config" / "papers" / "quick.yaml"})
EOF
}

# The command-line overrides this cluster needs beside the profile: its partition and account (the
# profile leaves them commented out), no GPU (the profile asks one per train/landscape job), at
# most the node's CPUs per job (the profile asks 4 threads), and a 5 s first status check instead
# of 40 s (pace only: sub-second smoke jobs).
SLURM_ARGS=(--profile "$REPO/profiles/slurm"
    --default-resources slurm_partition=fedbench slurm_account=fedbench
    --set-resources train:gpu=0 landscape:gpu=0
    --set-threads "train=$CPUS" "landscape=$CPUS"
    --slurm-init-seconds-before-status-checks 5)

WS_SLURM=$ST/ws-slurm
WS_LOCAL=$ST/ws-local
copy_workflow "$WS_SLURM"
copy_workflow "$WS_LOCAL"

log "SLURM run: snakemake ${SLURM_ARGS[*]} quick --config scale=smoke"
T_A=$(date +%s)
(cd "$WS_SLURM" && snakemake "${SLURM_ARGS[@]}" quick --config scale=smoke) >"$ST/log/snakemake-slurm.log" 2>&1 ||
    { tail -50 "$ST/log/snakemake-slurm.log"; die "the SLURM run failed (log: $ST/log/snakemake-slurm.log)"; }
T_B=$(date +%s)
log "SLURM run done ($((T_B - T_A)) s)"

log "local run: snakemake --cores $CPUS quick --config scale=smoke"
(cd "$WS_LOCAL" && snakemake --cores "$CPUS" quick --config scale=smoke) >"$ST/log/snakemake-local.log" 2>&1 ||
    { tail -50 "$ST/log/snakemake-local.log"; die "the local run failed"; }
T_C=$(date +%s)
log "local run done ($((T_C - T_B)) s)"

compare_metrics() { # the count of metrics.jsonl, all byte-identical between the two workspaces
    "$VENV_BIN/python" - "$WS_SLURM" "$WS_LOCAL" <<'EOF'
import sys
from pathlib import Path
a, b = (Path(p) / "results/smoke/runs" for p in sys.argv[1:3])
fa = sorted(p.relative_to(a) for p in a.rglob("metrics.jsonl"))
fb = sorted(p.relative_to(b) for p in b.rglob("metrics.jsonl"))
if fa != fb or not fa:
    sys.exit(f"different sets of metrics.jsonl: {len(fa)} under SLURM, {len(fb)} locally")
diff = [str(p) for p in fa if (a / p).read_bytes() != (b / p).read_bytes()]
if diff:
    sys.exit(f"{len(diff)} of {len(fa)} metrics.jsonl differ: {diff}")
print(len(fa))
EOF
}
N_IDENTICAL=$(compare_metrics) || die "metrics differ"
log "byte-identical metrics.jsonl (SLURM vs local): $N_IDENTICAL"

# Every job not declared a localrule ran as a SLURM job: as many `rule X:` jobs in Snakemake's
# log as jobs in sacct, and only figure/table/quick (the workflow's localrules) ran on this host.
SACCT_FMT=JobID,Comment%90,Partition,Account,ReqMem,Timelimit,ReqCPUS,State,ExitCode
sacct -X -a -P -S now-1days --format="$SACCT_FMT" >"$ST/log/sacct-main.txt"
echo "sacct -X --format=$SACCT_FMT:"
cat "$ST/log/sacct-main.txt"
N_REMOTE=$(grep -c '^rule ' "$ST/log/snakemake-slurm.log" || true)
N_SUBMITTED=$(grep -c 'submitted with SLURM jobid' "$ST/log/snakemake-slurm.log" || true)
N_SACCT=$(($(wc -l <"$ST/log/sacct-main.txt") - 1))
LOCAL_RULES=$(sed -n 's/^localrule \([a-z_]*\):.*/\1/p' "$ST/log/snakemake-slurm.log" | sort -u | tr '\n' ' ')
log "jobs: $N_REMOTE remote rules in the log, $N_SUBMITTED submitted, $N_SACCT in sacct; localrules: $LOCAL_RULES"
[ "$N_REMOTE" -gt 0 ] && [ "$N_REMOTE" = "$N_SUBMITTED" ] && [ "$N_SUBMITTED" = "$N_SACCT" ] ||
    die "not every job was a SLURM job"
for r in $LOCAL_RULES; do
    case $r in figure | table | quick) ;; *) die "rule $r ran locally" ;; esac
done
grep -v '^JobID' "$ST/log/sacct-main.txt" | awk -F'|' '$8 != "COMPLETED" {bad=1} END {exit bad}' ||
    die "a SLURM job did not complete"

# The train rule's resources as sbatch got them: mem_mb=8000, runtime=240 min, threads=CPUS
N_TRAIN=$(grep -c 'rule_train' "$ST/log/sacct-main.txt" || true)
N_TRAIN_OK=$(awk -F'|' -v cpus="$CPUS" '$2 ~ /rule_train/ && $5 == "8000M" && $6 == "04:00:00" && $7 == cpus && $3 == "fedbench" && $4 == "fedbench"' \
    "$ST/log/sacct-main.txt" | wc -l)
log "train jobs in sacct: $N_TRAIN; with ReqMem=8000M Timelimit=04:00:00 ReqCPUS=$CPUS partition/account fedbench: $N_TRAIN_OK"
[ "$N_TRAIN" -gt 0 ] && [ "$N_TRAIN" = "$N_TRAIN_OK" ] || die "the train rule's resources did not reach sbatch"

# Logs: the runs' own logs under logs/{scale}/train/ (docs/running.md); the plugin's per-job SLURM
# logs under .snakemake/slurm_logs/rule_{rule}/{wildcards}/{jobid}.log, deleted when the job
# succeeds unless --slurm-keep-successful-logs.
N_TRAIN_LOGS=$(find "$WS_SLURM/logs/smoke/train" -name '*.log' | wc -l)
N_SLURM_LOGS=0
[ ! -d "$WS_SLURM/.snakemake/slurm_logs" ] || N_SLURM_LOGS=$(find "$WS_SLURM/.snakemake/slurm_logs" -name '*.log' | wc -l)
log "run logs logs/smoke/train/**.log: $N_TRAIN_LOGS; SLURM logs left in .snakemake/slurm_logs: $N_SLURM_LOGS"
[ "$N_TRAIN_LOGS" = "$N_IDENTICAL" ] || die "missing training logs"
grep -m1 'submitted with SLURM jobid' "$ST/log/snakemake-slurm.log" || true
T_MAIN=$(date +%s)

# --- 4. faults ----------------------------------------------------------------------------------
# The long jobs come from tests/cluster/slow.yaml (an overlay: FedAvg with a sleep in each round's
# aggregation, its numbers FedAvg's), copied into both workspaces.
for ws in "$WS_SLURM" "$WS_LOCAL"; do cp "$REPO"/tests/cluster/{slow.yaml,slow_fedavg.py} "$ws"/; done
SLOW=(--configfile slow.yaml)
# Snakemake's own lines for the train jobs it planned in a log: their metrics.jsonl outputs.
planned_runs() { grep -A12 '^rule train:' "$1" | sed -n 's/^ *output: \([^,]*metrics\.jsonl\).*/\1/p' | sort -u; }

if [ "$FAULTS" = 1 ]; then
    # a) a training job cancelled after its first round's checkpoint; Snakemake reports the
    #    failure (no retry); --rerun-incomplete resumes it from the checkpoint, byte-identical to
    #    the same run uninterrupted (run locally)
    RUN_A=results/smoke/runs/synthetic-1-1/natural/linear/slow-fedavg-10s/seed0
    CK=(--config scale=smoke checkpoint_every=1 checkpoint_min_seconds=0)
    log "fault a: $RUN_A under SLURM (2 rounds of 10 s, a checkpoint each round); scancel after round 1"
    (cd "$WS_SLURM" && exec timeout 600 snakemake "${SLURM_ARGS[@]}" --retries 0 "$RUN_A/metrics.jsonl" "${CK[@]}" "${SLOW[@]}") \
        >"$ST/log/snakemake-fault-a.log" 2>&1 &
    SM_PID=$!
    for _ in $(seq 240); do [ -f "$WS_SLURM/$RUN_A/checkpoint.pt" ] && break; sleep 0.5; done
    [ -f "$WS_SLURM/$RUN_A/checkpoint.pt" ] || die "fault a: no checkpoint written"
    JOB_A=$(squeue -h -t R -o '%i %k' | awk '/rule_train/ {print $1; exit}')
    [ -n "$JOB_A" ] || die "fault a: no running train job to cancel"
    scancel "$JOB_A"
    set +e
    wait "$SM_PID"
    RC_A=$?
    set -e
    log "fault a: cancelled SLURM job $JOB_A; snakemake exit status $RC_A; sacct: $(sacct -X -n -P -j "$JOB_A" --format=State,ExitCode)"
    grep -m3 -E "SLURM-job|Error in rule" "$ST/log/snakemake-fault-a.log" || true
    [ "$RC_A" != 124 ] || die "fault a: Snakemake did not notice the cancelled job in 10 minutes"
    [ "$RC_A" != 0 ] || die "fault a: Snakemake did not report the cancelled job"
    [ ! -f "$WS_SLURM/$RUN_A/metrics.jsonl" ] || die "fault a: the cancelled run left a metrics.jsonl"
    (cd "$WS_SLURM" && timeout 600 snakemake "${SLURM_ARGS[@]}" --retries 0 --rerun-incomplete "$RUN_A/metrics.jsonl" "${CK[@]}" "${SLOW[@]}") \
        >"$ST/log/snakemake-fault-a-rerun.log" 2>&1 || die "fault a: the --rerun-incomplete run failed"
    grep -E '^(resumed|resumed_from_round):' "$WS_SLURM/$RUN_A/run.yaml"
    grep -q '^resumed_from_round: 1$' "$WS_SLURM/$RUN_A/run.yaml" || die "fault a: the rerun did not resume from round 1"
    (cd "$WS_LOCAL" && snakemake --cores "$CPUS" "$RUN_A/metrics.jsonl" "${CK[@]}" "${SLOW[@]}") \
        >"$ST/log/snakemake-fault-a-local.log" 2>&1 || die "fault a: the local run failed"
    cmp "$WS_SLURM/$RUN_A/metrics.jsonl" "$WS_LOCAL/$RUN_A/metrics.jsonl" || die "fault a: the resumed run differs"
    log "fault a: resumed from round 1 under SLURM; metrics.jsonl byte-identical to the uninterrupted local run"

    # b) memory overridden tiny: SLURM kills the job (OUT_OF_MEMORY, or FAILED: below); fedbench's
    #    advice names mem_mb
    # c) runtime overridden to 1 minute on a run that needs 400 s: SLURM stops it (TIMEOUT) within
    #    its check interval; fedbench's advice names runtime
    RUN_B=results/smoke/runs/synthetic-1-1/natural/linear/fedavg/seed0
    RUN_C=results/smoke/runs/synthetic-1-1/natural/linear/slow-fedavg-200s/seed0
    for fault in "b:train:mem_mb=50:$RUN_B:OUT_OF_MEMORY:mem_mb" "c:train:runtime=1:$RUN_C:TIMEOUT:runtime"; do
        IFS=: read -r name rule res run state resource <<<"$fault"
        log "fault $name: --set-resources $rule:$res, $run"
        T_F=$(date +%s)
        set +e
        (cd "$WS_SLURM" && timeout 600 snakemake "${SLURM_ARGS[@]}" --set-resources "$rule:$res" train:gpu=0 landscape:gpu=0 \
            --forcerun train --retries 0 "$run/metrics.jsonl" --config scale=smoke "${SLOW[@]}") >"$ST/log/snakemake-fault-$name.log" 2>&1
        rc=$?
        set -e
        JOB=$(sed -n 's/.*submitted with SLURM jobid \([0-9]*\).*/\1/p' "$ST/log/snakemake-fault-$name.log" | tail -1)
        log "fault $name: snakemake exit status $rc after $(($(date +%s) - T_F)) s; job $JOB: $(sacct -X -n -P -j "$JOB" --format=ReqMem,Timelimit,Elapsed,State,ExitCode)"
        grep -A1 "each job the scheduler stopped at a limit" "$ST/log/snakemake-fault-$name.log" || true
        [ "$rc" != 124 ] || die "fault $name: Snakemake did not notice the stopped job in 10 minutes"
        [ "$rc" != 0 ] || die "fault $name: the job was not stopped"
        # without cgroups (this cluster: jobacct_gather's OverMemoryKill) SLURM 22.05 records a job
        # killed for memory as FAILED; its SLURM log says "exceeded memory limit" (fedbench's advice
        # reads it there)
        case "$(sacct -X -n -P -j "$JOB" --format=State)" in
            *"$state"* | FAILED*) ;;
            *) die "fault $name: neither $state nor FAILED" ;;
        esac
        grep -q "stopped at its .*--set-resources $rule:$resource=" "$ST/log/snakemake-fault-$name.log" ||
            die "fault $name: no advice naming $resource"
    done
    (cd "$WS_SLURM" && snakemake "${SLURM_ARGS[@]}" --forcerun train --retries 0 "$RUN_B/metrics.jsonl" --config scale=smoke) \
        >"$ST/log/snakemake-fault-restore.log" 2>&1 || die "restoring $RUN_B"

    # d) the Snakemake head process killed (SIGKILL) while the grid's jobs run, after some finished;
    #    the jobs it left in the queue cancelled; a restart (after --unlock) submits only the runs
    #    not finished, and the grid ends byte-identical
    RUNS_D=$(cd "$WS_SLURM" && find results/smoke/runs -path '*/slow-*' -prune -o -name metrics.jsonl -print | sort)
    N_D=$(wc -l <<<"$RUNS_D")
    (cd "$WS_SLURM" && rm -f $RUNS_D)
    log "fault d: $N_D runs of the quick grid removed; the grid under SLURM, its head killed once 3 are done"
    (cd "$WS_SLURM" && exec snakemake "${SLURM_ARGS[@]}" quick --config scale=smoke) >"$ST/log/snakemake-fault-d.log" 2>&1 &
    SM_PID=$!
    for _ in $(seq 600); do
        [ "$(cd "$WS_SLURM" && ls $RUNS_D 2>/dev/null | wc -l)" -ge 3 ] && break
        sleep 0.5
    done
    kill -KILL "$SM_PID"
    wait "$SM_PID" 2>/dev/null || true
    QUEUED=$(squeue -h -o %i | wc -l)
    scancel --user=root
    for _ in $(seq 120); do [ -z "$(squeue -h -o %i)" ] && break; sleep 0.5; done
    DONE_D=$(cd "$WS_SLURM" && ls $RUNS_D 2>/dev/null | sort || true)
    N_DONE=$(grep -c . <<<"$DONE_D" || true)
    log "fault d: head killed with $N_DONE of $N_D runs finished; $QUEUED of its jobs left in the queue, cancelled"
    set +e
    (cd "$WS_SLURM" && timeout 900 snakemake "${SLURM_ARGS[@]}" quick --config scale=smoke) >"$ST/log/snakemake-fault-d-restart.log" 2>&1
    rc=$?
    set -e
    if [ "$rc" != 0 ] && grep -q "cannot be locked" "$ST/log/snakemake-fault-d-restart.log"; then
        log "fault d: the restart refused the stale lock (as docs/running.md says); --unlock, restart"
        (cd "$WS_SLURM" && snakemake "${SLURM_ARGS[@]}" quick --config scale=smoke --unlock) >/dev/null 2>&1
        (cd "$WS_SLURM" && snakemake "${SLURM_ARGS[@]}" quick --config scale=smoke) >"$ST/log/snakemake-fault-d-restart.log" 2>&1 ||
            die "fault d: the restart failed"
    elif [ "$rc" != 0 ]; then
        die "fault d: the restart failed (log: $ST/log/snakemake-fault-d-restart.log)"
    fi
    AGAIN=$(planned_runs "$ST/log/snakemake-fault-d-restart.log")
    N_AGAIN=$(grep -c . <<<"$AGAIN" || true)
    TWICE=$(comm -12 <(echo "$DONE_D") <(echo "$AGAIN") | grep -c . || true)
    log "fault d: the restart trained $N_AGAIN runs; of the $N_DONE finished before, $TWICE trained again"
    [ "$TWICE" = 0 ] || die "fault d: finished runs were submitted again"
    [ $((N_DONE + N_AGAIN)) = "$N_D" ] || die "fault d: $N_DONE finished + $N_AGAIN trained != $N_D"
    N_IDENTICAL_D=$(compare_metrics) || die "metrics differ after the faults"
    log "after the faults: byte-identical metrics.jsonl (SLURM vs local): $N_IDENTICAL_D"
fi

log "OK: $N_IDENTICAL metrics.jsonl byte-identical (SLURM vs local), $N_SACCT SLURM jobs, train resources read back from sacct"
log "times: packages $((T_INSTALLED - T0)) s, cluster start $((T_CLUSTER - T_INSTALLED)) s, SLURM grid $((T_B - T_A)) s, local grid $((T_C - T_B)) s, faults $(($(date +%s) - T_MAIN)) s"
