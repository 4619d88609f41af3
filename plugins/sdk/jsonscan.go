package sdk

// SetResultJSON checks a handler's result document with the same one-pass
// JSON syntax check that writ gen puts into generated packages; the copy in
// jsonscan_gen.go is made from schema/gen/internal/jsonscan by:
//go:generate sh -c "{ sed -n '1,3p' jsonscan_gen.go; printf '\\npackage sdk\\n'; sed '1,/^package jsonscan$/d' ../../schema/gen/internal/jsonscan/scan.go; } > jsonscan_gen.go.tmp && mv jsonscan_gen.go.tmp jsonscan_gen.go"
