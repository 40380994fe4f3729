#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, and the CPU-only replay
# study run on it through `snakemake --executor slurm`: one job per study
# worker, all sharing one PostgreSQL study over TCP, then one job that reads
# the study's rows back and checks them (budget exact, no configuration twice).
#
#   sudo bash benchmarks/slurm_cluster.sh [WORK] [LOG]     (default /tmp/slurm-cluster, WORK/slurm-run.txt)
#
# Needs root and Debian's packages: apt-get install slurm-wlm munge postgresql
# (installed here when missing), and the project installed with the slurm and
# postgresql extras: pip install -e '.[slurm,postgresql]'. Starts munged,
# slurmctld, slurmd and a PostgreSQL server in WORK, and stops them at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/slurm-cluster}
LOG=${2:-$WORK/slurm-run.txt}
WORKERS=${WORKERS:-4}
BUDGET=${BUDGET:-60}
PYTHON=${PYTHON:-$(command -v python3)}
PG_PORT=${PG_PORT:-55432}

[ "$(id -u)" = 0 ] || { echo "error: run as root (it starts munged, slurmctld and slurmd)"; exit 2; }
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge postgresql >/dev/null
fi
"$PYTHON" -c "import snakemake_executor_plugin_slurm, psycopg2, tuner" \
  || { echo "error: $PYTHON lacks the project or its extras: pip install -e '.[slurm,postgresql]'"; exit 2; }
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)

rm -rf "$WORK" && mkdir -p "$WORK"/{slurm/spool,slurm/state,munge,pg,run}
chmod 755 "$WORK"
mkdir -p "$(dirname "$LOG")"
exec > >(tee "$LOG") 2>&1
NODE=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)

stop_all() {
  set +e
  [ -n "${SLURMD_PID:-}" ] && kill "$SLURMD_PID"
  [ -n "${SLURMCTLD_PID:-}" ] && kill "$SLURMCTLD_PID"
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg/data" -m fast stop >/dev/null 2>&1
  [ -f "$WORK/munge/munged.pid" ] && kill "$(cat "$WORK/munge/munged.pid")"
  [ -n "${LINKED_CONF:-}" ] && rm -f /etc/slurm/slurm.conf
  # Not a bare wait: that would wait for the tee of this script's own output.
  wait "$SLURMD_PID" "$SLURMCTLD_PID" 2>/dev/null
}
trap stop_all EXIT

echo "== $(date -u +%FT%TZ) single-node SLURM on $NODE ($CPUS CPUs, $MEM_MB MB), $(slurmctld -V), $("$PGBIN/postgres" -V)"

# munge: the credentials slurmctld and slurmd exchange.
chown munge:munge "$WORK/munge"
runuser -u munge -- /usr/sbin/munged --socket="$WORK/munge/munge.socket" --pid-file="$WORK/munge/munged.pid" \
  --log-file="$WORK/munge/munged.log" --seed-file="$WORK/munge/munged.seed"
export MUNGE_SOCKET="$WORK/munge/munge.socket"

cat > "$WORK/slurm/slurm.conf" <<CONF
ClusterName=tuner
SlurmctldHost=$NODE(127.0.0.1)
AuthType=auth/munge
AuthInfo=socket=$WORK/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=46817
SlurmdPort=46818
StateSaveLocation=$WORK/slurm/state
SlurmdSpoolDir=$WORK/slurm/spool
SlurmctldPidFile=$WORK/run/slurmctld.pid
SlurmdPidFile=$WORK/run/slurmd.pid
SlurmctldLogFile=$WORK/slurm/slurmctld.log
SlurmdLogFile=$WORK/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$WORK/slurm/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=3600
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=cpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF="$WORK/slurm/slurm.conf"
# Commands inside a job (the srun of Snakemake's job step) read the default
# path, not SLURM_CONF: link it there while the cluster runs.
if [ -e /etc/slurm/slurm.conf ] && [ "$(readlink /etc/slurm/slurm.conf)" != "$SLURM_CONF" ]; then
  echo "error: /etc/slurm/slurm.conf exists; this script starts a cluster of its own and would replace it"; exit 2
fi
mkdir -p /etc/slurm && ln -sfn "$SLURM_CONF" /etc/slurm/slurm.conf && LINKED_CONF=1
/usr/sbin/slurmctld -D -i -f "$SLURM_CONF" >"$WORK/slurm/slurmctld.out" 2>&1 &
SLURMCTLD_PID=$!
sleep 2
/usr/sbin/slurmd -D -f "$SLURM_CONF" >"$WORK/slurm/slurmd.out" 2>&1 &
SLURMD_PID=$!
for _ in $(seq 60); do
  sinfo -h -N -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed)' && break
  sleep 1
done
echo "== sinfo"
sinfo -N -l

# PostgreSQL on 127.0.0.1: the study storage every job reaches over TCP.
chown postgres:postgres "$WORK/pg"
runuser -u postgres -- "$PGBIN/initdb" -D "$WORK/pg/data" -U postgres --auth=trust >/dev/null
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories=$WORK/pg" start >/dev/null
runuser -u postgres -- "$PGBIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -q \
  -c "CREATE USER tuner PASSWORD 'tuner'" -c "CREATE DATABASE tuning OWNER tuner"
STORAGE="postgresql+psycopg2://tuner:tuner@127.0.0.1:$PG_PORT/tuning"
echo "== PostgreSQL at $STORAGE (a throwaway server and password)"

cat > "$WORK/replay.yaml" <<YAML
table: $ROOT/results/reference/nvidia-h200/measurements.parquet
source: "sweep:reduce_space"
family: reduce
dtype: int32
n: 268435456
storage: "$STORAGE"
study: "slurm/reduce_space"
budget: $BUDGET
workers: $WORKERS
sampler: tpe
out: $WORK/out
YAML

echo "== snakemake --executor slurm: $WORKERS worker jobs and one rows job, budget $BUDGET"
cd "$ROOT"
start=$(date +%s)
# What SLURM says while the jobs run: squeue every second, changes only.
( last=""; while :; do
    now=$(squeue -h -o '%i %k %T %R' 2>/dev/null | sort -n)
    [ "$now" != "$last" ] && { echo "-- $(date +%T)"; echo "${now:-(no jobs queued or running)}"; }
    last=$now; sleep 1
  done ) > "$WORK/squeue.txt" &
POLLER_PID=$!
set +e
"$PYTHON" -m snakemake -s workflow/replay.smk --configfile "$WORK/replay.yaml" --profile workflow/profiles/slurm \
  --slurm-no-account --slurm-init-seconds-before-status-checks 2 --slurm-logdir "$WORK/slurm-logs" \
  --default-resources slurm_partition=cpu runtime=10 mem_mb=1000 cpus_per_task=1 --jobs "$WORKERS" \
  --directory "$WORK" 2>&1 | grep -v '^\s*$'
status=${PIPESTATUS[0]}
set -e
echo "== snakemake exit status $status after $(( $(date +%s) - start )) s"

kill "$POLLER_PID"
echo "== squeue while the workflow ran (job id, comment: the rule, state, node or reason)"
cat "$WORK/squeue.txt"
echo "== scontrol show job (finished jobs kept for MinJobAge)"
scontrol -o show job | awk '{ line = ""; for (i = 1; i <= NF; i++) if ($i ~ /^(JobId|JobState|ExitCode|RunTime|Comment|NodeList|TRES)=/) line = line " " $i; print line }' | sort -t= -k2 -n
echo "== job completion log (jobcomp/filetxt)"
sed -E 's/ (UserId|GroupId|Account|QOS|WorkDir|StdOut|StdErr|StdIn|ReservationName|Tres|DerivedExitCode)=[^ ]*//g' "$WORK/slurm/jobcomp.txt"
echo "== worker outputs"
for f in "$WORK"/out/workers/*.json; do
  "$PYTHON" -c "import json,sys; r=json.load(open(sys.argv[1])); r['keys']=len(r['keys']); print(sys.argv[1].split('/')[-1], json.dumps(r))" "$f"
done
echo "== rows job"
cat "$WORK/out/logs/rows.log"
"$PYTHON" - "$WORK" "$BUDGET" <<'PY'
import json, sys
from pathlib import Path
import pandas as pd
work, budget = Path(sys.argv[1]), int(sys.argv[2])
rows = pd.read_parquet(work / "out" / "rows.parquet")
keys = [k for f in sorted((work / "out" / "workers").glob("*.json")) for k in json.loads(f.read_text())["keys"]]
print(f"rows {len(rows)}, distinct {rows.config_key.nunique()}, budget {budget}; measurements by the workers {len(keys)}, "
      f"distinct {len(set(keys))}; rows == measurements: {sorted(rows.config_key) == sorted(keys)}")
ok = rows[rows.status == "ok"]
best = ok.loc[ok.bandwidth_gbs.idxmax()]
print(f"best of the study: {best.bandwidth_gbs:.0f} GB/s {best.config_key}")
sys.exit(0 if len(rows) == budget == len(keys) == len(set(keys)) and sorted(rows.config_key) == sorted(keys) else 1)
PY
check=$?
echo "== done: snakemake $status, check $check"
exit $(( status || check ))
