package gen

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/schema/ir"
)

func TestGenerateRefusesGoNameCollisions(t *testing.T) {
	s := &ir.Schema{Entries: []*ir.Entry{{Name: "a.b", Number: 1, Class: ir.ClassRequest, Keys: []string{},
		Fields: []*ir.Field{{Name: "job_id", Kind: ir.KindString}, {Name: "job__id", Kind: ir.KindString}}}}}
	_, err := Generate(s, Options{Package: "p"})
	if err == nil || !strings.Contains(err.Error(), `"job_id" and "job__id"`) {
		t.Fatalf("want a collision error naming both fields, got %v", err)
	}
}

func TestGenerateRefusesFailingSchema(t *testing.T) {
	s := &ir.Schema{Entries: []*ir.Entry{{Name: "a.b", Number: 1, Keys: []string{}}}}
	_, err := Generate(s, Options{Package: "p"})
	if err == nil || !strings.Contains(err.Error(), ir.CodeUnclassifiedType) {
		t.Fatalf("want WRIT_UNCLASSIFIED_TYPE, got %v", err)
	}
}

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{
		"job_id": "JobID", "job.state_report": "JobStateReport", "cpu_millis": "CPUMillis",
		"items": "Items", "1st": "X1st", "url": "URL",
	} {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
	if fieldName("items") != "ItemsField" || fieldName("order") != "OrderField" || fieldName("queue") != "Queue" {
		t.Fatal("fieldName must avoid ir.Payload method names")
	}
}
