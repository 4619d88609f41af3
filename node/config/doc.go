// Package config is the only reader of viper in writ. It turns a YAML or TOML
// file, WRIT_* environment variables and command-line flags (in increasing
// precedence) into one validated Node value, and parses the cluster-wide
// configuration documents that `writctl config upgrade` submits. Programs
// embedding a node (package node) load their configuration with Load too.
//
// Rules:
//
//  1. Every key is declared in one table (Keys), with its range; a key in a
//     file, a WRIT_* variable or a flag that is not in the table is an
//     error naming it.
//  2. Every value is validated (addresses and ports, paths, durations,
//     ranges, enums) before anything starts; the first problem is reported
//     as one line naming the key, where it came from, and how to fix it.
//  3. Cluster documents (writ's own settings, config type cluster.config)
//     may only carry the keys marked cluster-wide; a setting that overrides
//     a node key takes that key's range from the same table, so writctl and
//     writd accept exactly the same values. Each setting is either
//     reloadable live after activation or reported as "restart required".
//  4. Handler plugins are a list: plugins: [{path, sha256}] in a file,
//     --plugin PATH[=SHA256] (repeatable) or WRIT_PLUGINS (comma-separated)
//     otherwise; a later source replaces the whole list.
//
// node converts a Node into each package's typed Config; this package
// imports no runtime package so writctl can validate upgrade files with the
// same rules as writd.
package config
