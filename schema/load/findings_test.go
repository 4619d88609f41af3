package load

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	jobsschema "github.com/writ-dev/writ/examples/jobs/schema"
)

const base = `package t

machines: m: {
	key: "id"
	states: ["A", "B", "C"]
	initial: ["A"]
	terminal: ["C"]
	transitions: {A: ["B", "C"], B: ["A", "C"]}
}
`

func TestFindings(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"syntax", "package t\nentries: {", "x.cue:2:11: BLOCKED WRIT_CUE_ERROR"},
		{"unclassified", base + `entries: "m.x": {type_number: 1, machine: "m", keys: [], payload: id: string}`, "x.cue:10:10: BLOCKED WRIT_UNCLASSIFIED_TYPE"},
		{"unknown class", base + `entries: "m.x": {type_number: 1, class: "wish", keys: [], payload: id: string}`, "BLOCKED WRIT_UNKNOWN_CLASS"},
		{"guard unknown state", base + `entries: "m.x": {type_number: 1, class: "request", machine: "m", to: state: "Z", keys: [], payload: id: string}`, "WRIT_GUARD_UNKNOWN_STATE"},
		{"transition to unknown state", strings.Replace(base, `B: ["A", "C"]`, `B: ["A", "Q"]`, 1), "WRIT_GUARD_UNKNOWN_STATE"},
		{"terminal has exit", strings.Replace(base, `B: ["A", "C"]}`, `B: ["A", "C"], C: ["A"]}`, 1), "BLOCKED WRIT_TERMINAL_HAS_EXIT"},
		{"unreachable", strings.Replace(base, `states: ["A", "B", "C"]`, `states: ["A", "B", "C", "D"]`, 1), "REVIEW_REQUIRED WRIT_UNREACHABLE_STATE"},
		{"fact without id", base + `entries: "m.x": {type_number: 1, class: "fact", keys: [], payload: id: string}`, "INCOMPLETE WRIT_FACT_WITHOUT_ID"},
		{"duplicate number", base + `entries: "m.x": {type_number: 1, class: "request", keys: [], payload: id: string}
entries: "m.y": {type_number: 1, class: "request", keys: [], payload: id: string}`, "BLOCKED WRIT_DUPLICATE_TYPE_NUMBER"},
		{"default value", base + `entries: "m.x": {type_number: 1, class: "request", keys: [], payload: {id: string, l: *"a" | "b"}}`, "WRIT_UNSUPPORTED_CONSTRAINT: entries.m.x.payload.l"},
		{"unbounded int", base + `entries: "m.x": {type_number: 1, class: "request", keys: [], payload: {id: string, n: int}}`, "integer without both bounds"},
		{"map", base + `entries: "m.x": {type_number: 1, class: "request", keys: [], payload: {id: string, n: [string]: int}}`, "pattern constraint"},
		{"custom validator", strings.Replace(base, "package t\n", "package t\n\nimport \"strings\"\n", 1) + `entries: "m.x": {type_number: 1, class: "request", keys: [], payload: {id: strings.HasPrefix("x")}}`, "WRIT_UNSUPPORTED_CONSTRAINT"},
		{"meta-schema", base + `entries: "m.x": {type_number: 1, class: "request", keys: [], colour: "red", payload: id: string}`, "BLOCKED WRIT_SCHEMA_INVALID"},
		{"key template", base + `entries: "m.x": {type_number: 1, class: "request", keys: ["m/{nope}"], payload: id: string}`, "WRIT_UNKNOWN_FIELD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Files([]File{{Name: "x.cue", Src: []byte(tc.src)}})
			var all []string
			for _, f := range r.Findings {
				all = append(all, f.String())
			}
			text := strings.Join(all, "\n")
			if !strings.Contains(text, tc.want) {
				t.Fatalf("want %q in findings:\n%s", tc.want, text)
			}
			if strings.Contains(tc.want, "BLOCKED") || strings.Contains(tc.want, "INCOMPLETE") || strings.Contains(tc.want, "UNSUPPORTED") {
				if !r.Failed() || r.Schema != nil {
					t.Fatal("a failing finding must leave no schema")
				}
			}
			for _, f := range r.Findings {
				if f.Pos.Line == 0 || f.Fix == "" {
					t.Errorf("finding without position or fix: %s", f)
				}
			}
		})
	}
}

func TestJobsSchemaIsClean(t *testing.T) {
	r, err := Dir("../../examples/jobs/schema")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) != 0 || r.Schema == nil {
		t.Fatalf("findings on the reference schema: %v", r.Findings)
	}
	if len(r.Schema.Entries) != 13 || len(r.Schema.Machines) != 3 {
		t.Fatalf("entries %d machines %d", len(r.Schema.Entries), len(r.Schema.Machines))
	}
}

// TestFingerprintThroughCUE: reformatting and re-commenting a schema keeps
// its fingerprint; changing a constraint changes it.
func TestFingerprintThroughCUE(t *testing.T) {
	src := base + `entries: "m.x": {type_number: 1, class: "request", machine: "m", to: state: "A", keys: ["m/{id}"], payload: {id: string & =~"^[a-z]+$"}}`
	fp := func(s string) string {
		r := Files([]File{{Name: "x.cue", Src: []byte(s)}})
		if r.Failed() {
			t.Fatal(r.Err())
		}
		return r.Schema.Fingerprint()
	}
	a := fp(src)
	if b := fp("// a comment\n\n" + strings.ReplaceAll(src, "\n", "\n\n")); b != a {
		t.Fatal("reformatting changed the fingerprint")
	}
	if c := fp(strings.Replace(src, "^[a-z]+$", "^[a-z0-9]+$", 1)); c == a {
		t.Fatal("a changed pattern kept the fingerprint")
	}
}

// TestEmbeddedSchemaMatchesGenerated: the schema writd embeds loads to the
// same model the generated jobsgen package was produced from.
func TestEmbeddedSchemaMatchesGenerated(t *testing.T) {
	r, err := FS(jobsschema.FS, ".", "examples/jobs/schema")
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed() {
		t.Fatal(r.Err())
	}
	if got, want := r.Schema.Fingerprint(), jobsgen.Fingerprint; got != want {
		t.Fatalf("embedded schema fingerprint %s, generated %s: run make gen", got, want)
	}
}

func TestDirErrorsNameTheDirectory(t *testing.T) {
	_, err := Dir("no/such/schema")
	if err == nil || !strings.Contains(err.Error(), "no/such/schema") || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("missing dir: %v", err)
	}
	_, err = Dir(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no .cue files") {
		t.Fatalf("empty dir: %v", err)
	}
}
