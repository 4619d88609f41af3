// Package load turns a CUE schema package (from disk or an fs.FS such as an
// embed.FS) into the plain-Go model of package ir. It is the only package of
// writ that imports cuelang.org/go.
//
// Loading happens in four steps, each of which reports problems as
// ir.Finding values with file:line:col, a stable code and a fix:
//
//  1. parse and build the CUE package (WRIT_CUE_ERROR);
//  2. check that every entry type has a valid class
//     (WRIT_UNCLASSIFIED_TYPE, WRIT_UNKNOWN_CLASS);
//  3. unify with the meta-schema's #Schema and validate
//     (WRIT_SCHEMA_INVALID);
//  4. translate each payload field's CUE constraints into ir.Field,
//     refusing anything the generator cannot compile
//     (WRIT_UNSUPPORTED_CONSTRAINT), then run ir.Schema.Check.
//
// A Result whose findings include a BLOCKED or INCOMPLETE one carries no
// Schema; callers must not generate from it.
package load
