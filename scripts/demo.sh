#!/usr/bin/env bash
# make demo: a 3-node writ cluster of real writd processes, each with its own
# jobs handler plugin process and data directory, driven by writctl through a
# short narrated scenario. The cluster runs secured: a dev CA made by
# `writ certs`, peer mTLS, API TLS with client certificates and tokens, roles,
# and an encrypted gossip pool (docs/security.md). KEEP=1 leaves the nodes running.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin}
DATA=${DATA:-demo-data}
KEEP=${KEEP:-}
HOSTS=(${DEMO_HOSTS:-127.0.0.1 127.0.0.2 127.0.0.3})
API_PORT=${DEMO_API_PORT:-7170}
RAFT_PORT=${DEMO_RAFT_PORT:-7171}
GOSSIP_PORT=${DEMO_GOSSIP_PORT:-7172}
NODES=(n1 n2 n3)

for b in writd writctl writ-jobs writ; do
	[ -x "$BIN/$b" ] || { echo "demo: $BIN/$b is missing: run 'make demo' (it builds everything first)"; exit 1; }
done

declare -A PID API
for i in 0 1 2; do API[${NODES[$i]}]="${HOSTS[$i]}:$API_PORT"; done
CERTS=$DATA/certs

step=0
say() { step=$((step + 1)); printf '\n\033[1m== %d. %s\033[0m\n' "$step" "$*"; }
note() { printf '   %s\n' "$*"; }
ctl() { local n=$1; shift; "$BIN/writctl" --addr "${API[$n]}" "$@"; }
show() { local n=$1; shift; printf '   $ writctl --addr %s %s\n' "${API[$n]}" "$*"; "$BIN/writctl" --addr "${API[$n]}" "$@" | sed 's/^/     /'; return "${PIPESTATUS[0]}"; }
die() { echo "demo: FAILED: $*"; dump_logs; exit 1; }
dump_logs() { for n in "${NODES[@]}"; do [ -f "$DATA/$n.log" ] && { echo "--- last lines of $DATA/$n.log"; tail -5 "$DATA/$n.log"; }; done; }

stop_all() {
	for n in "${NODES[@]}"; do
		p=${PID[$n]:-}
		[ -n "$p" ] && kill -INT "$p" 2>/dev/null || true
	done
	for n in "${NODES[@]}"; do
		p=${PID[$n]:-}
		[ -n "$p" ] && wait "$p" 2>/dev/null || true
	done
}
cleanup() {
	rc=$?
	if [ -n "$KEEP" ] && [ $rc -eq 0 ]; then
		echo
		echo "KEEP=1: the nodes keep running:"
		echo "  talk to them as ops (read, write, operator) after:"
		echo "  export WRITCTL_CACERT=$CERTS/ca.crt WRITCTL_CERT=$CERTS/ops.crt WRITCTL_KEY=$CERTS/ops.key"
		for n in "${NODES[@]}"; do echo "  $n pid ${PID[$n]:-?}  writctl --addr ${API[$n]} status"; done
		echo "stop them with: kill -INT ${PID[*]}"
		return
	fi
	stop_all
}
trap cleanup EXIT

start_node() { # name index [join]
	local n=$1 i=$2 join=${3:-}
	local h=${HOSTS[$i]}
	mkdir -p "$DATA/$n"
	# a joining node runs only a plugin pinned by its SHA-256 (docs/security.md)
	local sum
	sum=$(sha256sum "$BIN/writ-jobs" | cut -d' ' -f1)
	local args=(--node-id "$n" --data-dir "$DATA/$n" --api-addr "$h:$API_PORT" --raft-addr "$h:$RAFT_PORT" --gossip-addr "$h:$GOSSIP_PORT" --plugin "$BIN/writ-jobs=$sum")
	# secured: the node's certificate serves both peer mTLS and the API
	args+=(--raft-tls-cert-file "$CERTS/$n.crt" --raft-tls-key-file "$CERTS/$n.key" --raft-tls-ca-file "$CERTS/ca.crt")
	args+=(--api-tls-cert-file "$CERTS/$n.crt" --api-tls-key-file "$CERTS/$n.key" --api-tls-client-ca-file "$CERTS/ca.crt")
	args+=(--api-tokens-file "$DATA/tokens.yaml" --gossip-key-file "$DATA/gossip.key")
	[ -n "$join" ] && args+=(--join "$join")
	"$BIN/writd" "${args[@]}" >>"$DATA/$n.log" 2>&1 &
	PID[$n]=$!
}

wait_ready() { # name [timeout-seconds]
	local n=$1 t=${2:-20}
	for _ in $(seq $((t * 10))); do
		if ctl "$n" --timeout 1s status -o json 2>/dev/null | grep -q '"ready":true'; then return 0; fi
		kill -0 "${PID[$n]}" 2>/dev/null || die "$n exited; see $DATA/$n.log"
		sleep 0.1
	done
	die "$n not ready within ${t}s"
}

voters() { ctl "$1" --timeout 2s members -o json 2>/dev/null | grep -o '"role":"voter"' | wc -l; }

leader_of() { ctl "$1" --timeout 2s status -o json 2>/dev/null | sed -n 's/.*"leader_id":"\([^"]*\)".*/\1/p'; }

# the demo's keys, tokens and logs are readable by this user only
umask 077
rm -rf "$DATA"
mkdir -p "$DATA"

say "Make the cluster's credentials (writ certs: a dev CA, node and client certificates)"
"$BIN/writ" certs init --dir "$CERTS" --name demo >/dev/null
for i in 0 1 2; do "$BIN/writ" certs node "${NODES[$i]}" --ca "$CERTS" --host "${HOSTS[$i]}" >/dev/null; done
"$BIN/writ" certs client ops --ca "$CERTS" --role read --role write --role operator >/dev/null
(umask 077 && head -c 32 /dev/urandom | base64 >"$DATA/gossip.key")
READ_TOKEN=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
(umask 077 && cat >"$DATA/tokens.yaml" <<YAML
identities:
  - name: viewer
    token_sha256: $(printf %s "$READ_TOKEN" | sha256sum | cut -d' ' -f1)
    roles: [read]
YAML
)
note "CA:          $CERTS/ca.crt (ca.key stays in $CERTS; keep it offline outside a demo)"
note "nodes:       $CERTS/n1.crt n2.crt n3.crt (spiffe://writ/node/ID): peer mTLS and API TLS"
note "operator:    $CERTS/ops.crt (spiffe://writ/client/ops, roles read, write, operator)"
note "read-only:   token of identity viewer (only its SHA-256 is in $DATA/tokens.yaml)"
note "gossip key:  $DATA/gossip.key (0600)"
# every writctl call below authenticates as ops
export WRITCTL_CACERT=$CERTS/ca.crt WRITCTL_CERT=$CERTS/ops.crt WRITCTL_KEY=$CERTS/ops.key
unset WRITCTL_TOKEN
note "writctl calls below run as ops: WRITCTL_CACERT, WRITCTL_CERT and WRITCTL_KEY are set"

say "Start three writd nodes (each with its own writ-jobs plugin process and data dir)"
start_node n1 0
wait_ready n1
start_node n2 1 "${HOSTS[0]}:$GOSSIP_PORT"
start_node n3 2 "${HOSTS[0]}:$GOSSIP_PORT"
wait_ready n2 30
wait_ready n3 30
for _ in $(seq 200); do [ "$(voters n1)" = 3 ] && break; sleep 0.1; done
[ "$(voters n1)" = 3 ] || die "the cluster did not reach 3 voters"
note "n2 and n3 joined through serf gossip; the leader added them as learners and promoted them"
show n1 members
show n1 plugins | head -3

say "Deny by default: no credentials, then too few roles"
printf '   $ writctl --addr %s status        # TLS, but no client certificate or token\n' "${API[n1]}"
if env -u WRITCTL_CERT -u WRITCTL_KEY "$BIN/writctl" --addr "${API[n1]}" status >/dev/null 2>"$DATA/err"; then die "a call without credentials was served"; fi
grep -q 'no credentials' "$DATA/err" || die "no-credential call refused for another reason: $(cat "$DATA/err")"
sed 's/^/     /' "$DATA/err"
printf '   $ WRITCTL_TOKEN=<viewer token> writctl --addr %s submit job.submit ...\n' "${API[n1]}"
if env -u WRITCTL_CERT -u WRITCTL_KEY WRITCTL_TOKEN="$READ_TOKEN" "$BIN/writctl" --addr "${API[n1]}" \
	submit job.submit '{"job_id":"job-0","queue":"default","priority":1,"command":"x"}' >/dev/null 2>"$DATA/err"; then
	die "a read identity was allowed to submit"
fi
grep -q 'needs role' "$DATA/err" || die "read-identity submit refused for another reason: $(cat "$DATA/err")"
sed 's/^/     /' "$DATA/err"
note "the read identity may still read:"
env -u WRITCTL_CERT -u WRITCTL_KEY WRITCTL_TOKEN="$READ_TOKEN" "$BIN/writctl" --addr "${API[n1]}" status | grep -E '^(node|leader)' | sed 's/^/     /' || die "the read identity could not read status"

say "Create a queue (a request: the reply comes only after a majority committed it)"
show n2 submit queue.control '{"queue":"default","action":"create"}'
note "asked n2 (a follower): it forwarded the request to the leader's API"

say "Submit jobs; every COMMITTED reply is recorded"
: >"$DATA/acked"
for j in 1 2 3 4 5; do
	if out=$(ctl n1 submit job.submit "{\"job_id\":\"job-$j\",\"queue\":\"default\",\"priority\":$j,\"command\":\"render frame $j\"}"); then
		echo "job-$j" >>"$DATA/acked"
		note "job-$j: $(echo "$out" | head -1)"
	else
		die "job-$j was not committed"
	fi
done
note "bad input is refused with the field and the rule, and nothing is appended:"
if ctl n1 submit job.submit '{"job_id":"Bad ID","queue":"default","priority":1,"command":"x"}' 2>"$DATA/err"; then die "bad job accepted"; fi
note "$(cat "$DATA/err")"

say "Register a worker and deliver a dispatch receipt (acknowledged as received only)"
show n1 submit worker.join '{"worker_id":"w1","capacity":8}' >/dev/null
show n1 deliver job.dispatch '{"dispatch_id":"dispatch-1","scheduler":"sched","items":[{"job_id":"job-1","worker_id":"w1"},{"job_id":"job-2","worker_id":"w1"}]}'
note "per-item outcomes arrive on the watch stream, not in the receipt:"
sleep 0.5
show n1 watch --from 1 --type job.assign --count 2 --for 5s

say "Workers report facts: RUNNING, a duplicate, COMPLETED, then a terminal→running regression"
show n3 report job.state_report '{"report_id":"rep-1","job_id":"job-1","state":"RUNNING","seq":1,"worker_id":"w1"}'
show n3 report job.state_report '{"report_id":"rep-1","job_id":"job-1","state":"RUNNING","seq":1,"worker_id":"w1"}'
note "the duplicate is acknowledged again but applied once (deduplicated by fact ID)"
show n3 report job.state_report '{"report_id":"rep-2","job_id":"job-1","state":"COMPLETED","seq":2,"worker_id":"w1"}'
sleep 0.5
show n3 report job.state_report '{"report_id":"rep-3","job_id":"job-1","state":"RUNNING","seq":3,"worker_id":"w1"}'
for _ in $(seq 50); do ctl n1 conflicts -o json | grep -q 'job-1' && break; sleep 0.1; done
note "COMPLETED is terminal: the regression is quarantined as a conflict case, state preserved"
show n1 conflicts
show n1 get _m/job/job-1
ctl n1 status | grep -E 'health|conflicts' | sed 's/^/     /'

say "Kill the leader with SIGKILL"
old=$(leader_of n1)
[ -n "$old" ] || die "no leader known"
note "leader is $old (pid ${PID[$old]}): kill -9"
kill -9 "${PID[$old]}"
wait "${PID[$old]}" 2>/dev/null || true
PID[$old]=""
survivor=n1; [ "$old" = n1 ] && survivor=n2
new=""
for _ in $(seq 100); do
	new=$(leader_of "$survivor")
	[ -n "$new" ] && [ "$new" != "$old" ] && break
	sleep 0.1
done
[ -n "$new" ] && [ "$new" != "$old" ] || die "no new leader after killing $old"
note "new leader: $new"
wait_ready "$new"
if out=$(ctl "$new" submit job.submit '{"job_id":"job-6","queue":"default","priority":6,"command":"after failover"}'); then
	echo "job-6" >>"$DATA/acked"
	note "job-6 on the new leader: $(echo "$out" | head -1)"
else
	die "new leader did not commit job-6"
fi
missing=0
while read -r j; do
	ctl "$new" get "job/$j" >/dev/null 2>&1 || { note "MISSING: $j"; missing=$((missing + 1)); }
done <"$DATA/acked"
[ $missing -eq 0 ] || die "$missing acknowledged jobs lost"
note "all $(wc -l <"$DATA/acked") acknowledged jobs are present on $new"

say "Restart $old from its data directory; it catches up"
idx=$(( $(printf '%s\n' "${NODES[@]}" | grep -n "^$old$" | cut -d: -f1) - 1 ))
start_node "$old" "$idx"
wait_ready "$old" 30
for _ in $(seq 100); do ctl "$old" get --serializable job/job-6 >/dev/null 2>&1 && break; sleep 0.1; done
ctl "$old" get --serializable job/job-6 >/dev/null 2>&1 || die "$old did not catch up"
note "$old has job-6, committed while it was dead"

say "Configuration upgrade: validate, diff, stage, activate on a majority"
cat >"$DATA/upgrade.yaml" <<'YAML'
version: "2"
settings:
  commit_timeout: 4s
  max_batch: 128
  log_level: warn
YAML
show n1 config show
show n2 config upgrade --file "$DATA/upgrade.yaml" || die "config upgrade failed"
for n in "${NODES[@]}"; do note "$n: $(ctl "$n" status | grep '^config')"; done

say "Summary"
jobs=$(ctl n1 list job/ -o json | grep -o '"key":"job/' | wc -l)
note "nodes:      $(voters n1) voters; leader $(leader_of n1)"
note "jobs:       $jobs stored, $(wc -l <"$DATA/acked") acknowledged, 0 lost"
note "conflicts:  $(ctl n1 conflicts | head -1)"
note "config tag: $(ctl n1 status -o json | sed -n 's/.*"config_tag":"\([^"]*\)".*/\1/p')"
for n in "${NODES[@]}"; do ctl "$n" status | grep -Eq '^WARNING +insecure' && die "$n reports running insecure"; done
note "security:   peer mTLS, API TLS with roles, encrypted gossip on every node (no insecure warning);"
note "            $(cat "$DATA"/n?.log | grep -c 'api: audit') audited write/operator calls, $(cat "$DATA"/n?.log | grep -c 'api: permission denied') denied (grep 'api: audit' in the logs)"
note "logs:       $DATA/n1.log $DATA/n2.log $DATA/n3.log"
echo
echo "demo: OK"
