// Package runtimecat builds an ir.Catalog from a loaded schema at run time,
// so that a stock writd can serve any schema without generated code.
//
// New compiles every payload's constraints (kinds, ranges, patterns, enums,
// lengths, required and optional fields, nested structs and lists, a
// receipt's items) into Go closures once. On the request path a payload is
// decoded by a hand-written JSON reader and checked by those closures: no
// CUE and no reflection. The payloads it returns have the same routing
// accessors, the same stable binary encoding and the same JSON rendering as
// the code writ gen emits for the schema, and their validation errors are
// the same *ir.FieldError values, so nodes running a generated catalog and
// nodes running a runtime catalog share one log and one fingerprint.
//
// The package imports only the standard library, schema/ir, schema/wire
// (the encodings it shares with generated code), schema/jsonscan and
// schema/patterndfa.
package runtimecat
