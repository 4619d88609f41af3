// Package proccluster owns the real writd processes that writ's
// multi-process tests, the conformance suite's cluster tier and the
// robustness suite run as a cluster. One place starts, signals, kills,
// restarts and stops them, so every caller gets the same guarantees:
//
//  1. A node's environment is the parent's through procenv.Clean: nothing
//     the caller's shell exports (WRIT_*, WRITCTL_*) configures a node.
//  2. On Linux every node is started with Pdeathsig=SIGKILL: a test binary
//     or tool that is itself killed takes its cluster with it instead of
//     leaking writd processes that hold ports and data directories.
//  3. A node's stdout and stderr are appended to its log (Dir + ".log"), kept
//     across restarts, so a failing caller can show the tail.
//  4. A node keeps its data directory and API client across restarts; only
//     the process changes.
//  5. Every exit is recorded (its code, and whether the caller asked for it
//     with Kill, Stop or a terminating Signal), and a caller may observe
//     each one (Spec.OnExit) before Done is closed.
//
// Cluster adds what callers poll for over the client API: readiness, the
// number of voters, the ready leader and converged state. Flags build the
// command line every node shares; what a caller adds on top (schema,
// plugins pinned by sha256 with PluginFlags, timing, TLS, --insecure for
// joined test nodes) stays with the caller.
//
// The package sees a node only as a process, its log and its API: it must
// not import the consensus, membership or writd packages it is used to test
// (the depcheck test in this package says so).
package proccluster
