// Package pki makes and checks the certificates writ nodes and clients
// present to each other, with the standard library's crypto only.
//
// A cluster has one certificate authority (CA): a self-signed ECDSA P-256
// certificate, ca.crt, and its key, ca.key. Every certificate it issues
// carries its holder's identity as one URI subject alternative name:
//
//	spiffe://writ/node/<node-id>     a node (peer transport, server and client)
//	spiffe://writ/client/<name>      a client (API caller)
//
// A client certificate also names the roles its holder asks for in the
// subject's organizational units (OU), one role per unit; a server decides
// whether to honour them. A node certificate also lists the IP addresses and
// DNS names its listeners are reached at.
//
// Files are written with mode 0600 in directories of mode 0700; an existing
// key is never overwritten.
package pki
