#!/bin/sh
# metrics-cost.sh: the cost of metrics on `writctl bench`.
#
# Starts two 3-node clusters side by side on one machine, one with
# metrics.addr set on every node (and every node scraped once a second),
# one without (no metric is recorded: every hook is a nil check), and runs
# `writctl bench` against each leader in interleaved rounds, so that both
# see the same window of machine load. Prints one line per run (ops/s,
# p99, the 1-minute load average) and the means.
#
#   scripts/metrics-cost.sh BINDIR [ROUNDS] [CLIENTS] [OPS]
#
# BINDIR holds writd, writctl and writ-jobs. The clusters listen on
# ON_NET.1-3 and OFF_NET.1-3 (default 127.0.54 and 127.0.55), ports
# 7070-7072 (and 7079 for metrics); ON_BASE and OFF_BASE shift the last
# octet (ON_NET=127.0.9 ON_BASE=10: 127.0.9.11-13), so that both clusters
# can share one /24.
set -eu
bin=${1:?usage: metrics-cost.sh BINDIR [ROUNDS] [CLIENTS] [OPS]}
rounds=${2:-3}
clients=${3:-100}
ops=${4:-8000}
on=${ON_NET:-127.0.54}
off=${OFF_NET:-127.0.55}
onbase=${ON_BASE:-0}
offbase=${OFF_BASE:-0}
root=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$root"
}
trap cleanup EXIT INT TERM

host() { # cluster (on|off) node-index: the node's address
	if [ "$1" = on ]; then echo "$on.$((onbase + $2))"; else echo "$off.$((offbase + $2))"; fi
}

start() { # cluster node-index extra-flags...
	cl=$1 i=$2; shift 2
	h=$(host "$cl" "$i")
	d=$root/$cl-n$i
	mkdir -p "$d"
	join=""
	[ "$i" -gt 1 ] && join="--join $(host "$cl" 1):7072 --insecure"
	# shellcheck disable=SC2086
	env -u WRIT_METRICS_ADDR "$bin/writd" --node-id "n$i" --data-dir "$d" --api-addr "$h:7070" \
		--raft-addr "$h:7071" --gossip-addr "$h:7072" --plugin "$bin/writ-jobs" \
		--log-level warn $join "$@" >"$d.log" 2>&1 &
	pids="$pids $!"
	echo $! >>"$root/$cl.pids"
}

cputicks() { # cluster: user+system clock ticks of the cluster's writd and their plugin processes
	t=0
	for p in $(cat "$root/$1.pids"); do
		for q in $p $(cat /proc/$p/task/*/children 2>/dev/null); do
			v=$(awk '{print $14+$15}' /proc/$q/stat 2>/dev/null || echo 0)
			t=$((t + ${v:-0}))
		done
	done
	echo $t
}

waitready() { # addr
	for _ in $(seq 1 200); do
		"$bin/writctl" --addr "$1" --timeout 1s -o json status 2>/dev/null | grep -q '"ready": *true' && return 0
		sleep 0.2
	done
	echo "metrics-cost: $1 not ready" >&2
	exit 1
}

for cl in on off; do
	for i in 1 2 3; do
		if [ "$cl" = on ]; then start "$cl" "$i" --metrics-addr "$(host on "$i"):7079"; else start "$cl" "$i"; fi
		[ "$i" = 1 ] && waitready "$(host "$cl" 1):7070"
	done
	for i in 1 2 3; do waitready "$(host "$cl" "$i"):7070"; done
done

# scrape the metrics cluster every second, as Prometheus would
(
	while :; do
		for i in 1 2 3; do curl -s -o /dev/null "http://$(host on "$i"):7079/metrics" || true; done
		sleep 1
	done
) &
pids="$pids $!"

leader() { # cluster
	for i in 1 2 3; do
		if "$bin/writctl" --addr "$(host "$1" "$i"):7070" -o json status 2>/dev/null | grep -q '"is_leader": *true'; then
			echo "$(host "$1" "$i"):7070"
			return
		fi
	done
	echo "$(host "$1" 1):7070"
}

run() { # label cluster round
	addr=$(leader "$2")
	c0=$(cputicks "$2")
	out=$("$bin/writctl" --addr "$addr" --timeout 30s bench -c "$clients" -n "$ops" --run "$1-$3-$$" 2>&1) || true
	tput=$(echo "$out" | awk '/throughput/ {print $2}')
	p99=$(echo "$out" | awk '/latency/ {print $7}')
	c1=$(cputicks "$2")
	load=$(cut -d' ' -f1 /proc/loadavg)
	hz=$(getconf CLK_TCK)
	cpu=$(awk -v d=$((c1 - c0)) -v hz="$hz" -v n="$ops" 'BEGIN {printf "%.0f", d * 1000 / hz / (n / 1000)}')
	echo "$1 round $3: ${tput:-?} ops/s p99 ${p99:-?} cpu ${cpu}ms/kop load $load"
}

# one untimed warm-up run each
run warmup-on on 0 >/dev/null
run warmup-off off 0 >/dev/null
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) = 1 ]; then
		run on on "$r"; run off off "$r"
	else
		run off off "$r"; run on on "$r"
	fi
done | tee "$root/results"
awk '/ops\/s/ {v = substr($9, 1, length($9)-6); s[$1]+=$4; s2[$1]+=$4*$4; c[$1]+=v; c2[$1]+=v*v; n[$1]++; l[$1]+=$11}
	function sd(sum, sq, k) { return k > 1 ? sqrt((sq - sum*sum/k) / (k - 1)) : 0 }
	END {for (k in s) printf "%s: mean %.0f ops/s (sd %.0f), %.0f ms cluster CPU per 1000 ops (sd %.0f), over %d runs, mean load %.2f\n",
		k, s[k]/n[k], sd(s[k], s2[k], n[k]), c[k]/n[k], sd(c[k], c2[k], n[k]), n[k], l[k]/n[k]}' "$root/results"
