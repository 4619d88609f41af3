// Command writctl is the operator CLI for a writ cluster. It talks to any
// writd node over the writ.v1 gRPC API only.
//
//	writctl status | members | plugins | facts | conflicts
//	writctl submit <type> <json|@file|->      exit 0 only when COMMITTED
//	writctl report <type> <json|@file|->      a fact: acknowledged "received"
//	writctl deliver <type> <json|@file|->     a receipt: item outcomes on watch
//	writctl watch [--from N] [--type T] [--key K] [--count N]
//	writctl get <key> | list [prefix]
//	writctl outcome <request-id>
//	writctl config show | config upgrade --file F
//	writctl bench --clients N --ops M --type T --size B
//	writctl keyring list | install|use|remove --key-file FILE   gossip key rotation
//	writctl completion bash|zsh|fish|powershell
//
// Global flags: --addr host:port[,host:port...] (env WRITCTL_ADDR, default
// 127.0.0.1:7070; several: leader preferred, failover), -o
// text|json|yaml|table, --timeout. Exit codes: 0 success, 1 error, 2 usage,
// 3 REJECTED, 4 UNAVAILABLE (a node said so, or the request never left
// writctl: nothing appended), 5 UNCERTAIN (a node said so, or the request
// may have reached a node and no answer came; the request ID and `writctl
// outcome ID` are printed) or config upgrade failed, 6 NOT_COMMITTED (the
// request ID was fenced: not committed and never will be; safe to submit
// again with a new request ID).
package main
