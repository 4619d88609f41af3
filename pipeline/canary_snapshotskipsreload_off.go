//go:build !canary_snapshotskipsreload

package pipeline

// canarySnapshotSkipsReload is set only by the `canary_snapshotskipsreload` build tag, which
// exists solely so the suite's own tests can prove that their check catches this
// deliberately broken build: a node whose state is restored from a snapshot (or that
// starts after one was installed) does not run the reload hook for an activation the
// snapshot covers (breaks W5).
// Never set it in a build that serves requests.
const canarySnapshotSkipsReload = false
