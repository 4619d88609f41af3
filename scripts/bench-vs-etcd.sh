#!/usr/bin/env bash
# make bench-vs-etcd: builds writ and, from the tools/etcdbench module that
# pins them, etcd's server and its benchmark tool; then runs the side-by-side
# rounds (tools/etcdbench) and writes table.md, plot.svg and results.json to
# OUT. See docs/performance.md.
#   ROUNDS=N   interleaved rounds (default 3; ROUNDS=1 for a quick look)
#   SCALE=F    multiplier of every cell's operation count (default 1)
#   CELLS=a,b  only the cells whose name contains one of these
#   FAILOVER=D length of the SIGKILL-the-leader cell (default 9s; 0 skips it)
#   OUT=DIR    output directory (default bench-vs-etcd)
#   NETNS=NAME run the clusters inside this network namespace
#   WRITD_ARGS="--flag=v ..." extra writd flags, for A/B runs of one option
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
BIN=${BIN:-bin}
OUT=${OUT:-bench-vs-etcd}
ETCDBIN=$BIN/etcdbench
mkdir -p "$BIN" "$ETCDBIN"

echo "bench-vs-etcd: building writ"
$GO build -o "$BIN/" ./cmd/writd ./cmd/writctl ./examples/jobs/cmd/writ-jobs
echo "bench-vs-etcd: building etcd and its benchmark tool (tools/etcdbench/go.mod pins them)"
(cd tools/etcdbench && $GO build -o "../../$ETCDBIN/etcd" go.etcd.io/etcd/server/v3 &&
	$GO build -o "../../$ETCDBIN/benchmark" go.etcd.io/etcd/v3/tools/benchmark &&
	$GO build -o "../../$ETCDBIN/etcdbench" .)

args=(-writ-bin "$BIN" -etcd-bin "$ETCDBIN" -out "$OUT" -rounds "${ROUNDS:-3}" -scale "${SCALE:-1}" -failover "${FAILOVER:-9s}")
[ -n "${CELLS:-}" ] && args+=(-cells "$CELLS")
[ -n "${WRITD_ARGS:-}" ] && args+=(-writd-args "$WRITD_ARGS")
if [ -n "${NETNS:-}" ]; then
	exec ip netns exec "$NETNS" "$ETCDBIN/etcdbench" "${args[@]}"
fi
exec "$ETCDBIN/etcdbench" "${args[@]}"
