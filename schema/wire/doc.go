// Package wire is the runtime of writ's payload encodings: the stable binary
// encoding of a payload and the strict JSON reading of one. The code writ gen
// emits and the runtime catalog (schema/runtimecat) both encode and decode
// through it, so a generated catalog and a runtime catalog of the same schema
// read and write the same bytes and refuse bad input with the same
// *ir.FieldError, as protobuf-go's generated code shares its runtime.
//
// # The binary encoding
//
// A payload is its fields in declaration order, with no tags and no framing:
//
//   - an optional field: a presence byte (0 absent, 1 present), then the value
//     if present;
//   - string: uvarint byte length, then the UTF-8 bytes;
//   - int: zig-zag varint; uint: uvarint;
//   - float and number: 8 bytes, little-endian IEEE 754 bits;
//   - bool: one byte, 0 or 1;
//   - struct: its members in declaration order;
//   - list: uvarint count, then the elements (a receipt's items as their
//     fields).
//
// The encoding is stored in the log and sent between nodes: it never
// changes for a declared type (a new shape is a new entry type). The Append
// functions write it; a Decoder reads it, with the first error sticking so
// that decoding code needs no error checks until Finish.
//
// # JSON
//
// Document checks that a payload is one syntactically valid JSON object
// (schema/jsonscan, which accepts exactly what encoding/json accepts).
// Inside a checked document, Members walks an object's members with exact,
// case-sensitive keys and String, Int, Uint, Float, Bool, Object and List
// read one value each; none of them allocates beyond the value it returns.
//
// # Errors and paths
//
// Every error is an *ir.FieldError. JSON reading builds an error's Field
// path from the failing value outwards: "" is the value itself, Member(name)
// (".name") a member and Index(i) ("[i]") an element, joined with Under as
// the error returns through the enclosing values; Root finally stamps the
// entry type and drops the leading dot, so the path reads "items[2].job_id".
// A Decoder's errors name the field by its dotted path within the payload
// (without list indexes) and carry the type given to NewDecoder.
//
// The package imports only the standard library, schema/ir and
// schema/jsonscan: it is linked into every plugin and every node.
package wire
