package handler

import (
	"encoding/json"

	"github.com/writ-dev/writ/plugins/sdk"
)

// The handler's documents (Job, Worker, Queue and the Result of every call)
// are written and read with encoding/json. A hand-written codec measured no
// end-to-end gain worth its size (docs/plugins.md, the figures), and
// this is the code a schema author copies.

// putDoc writes v (one of the handler's document types) at key.
func putDoc(c *sdk.Call, key string, v any) {
	b, err := json.Marshal(v)
	if err != nil { // the document types hold only strings, numbers and lists
		panic("jobs handler: encode " + key + ": " + err.Error())
	}
	c.Put(key, b)
}

func putJob(c *sdk.Call, key string, j *Job)       { putDoc(c, key, j) }
func putWorker(c *sdk.Call, key string, w *Worker) { putDoc(c, key, w) }
func putQueue(c *sdk.Call, key string, q *Queue)   { putDoc(c, key, q) }

// setResult sets the call's result document.
func setResult(c *sdk.Call, r Result) error { return c.SetResult(r) }

// decodeDoc decodes the document b at key into v, as sdk.Call.GetJSON
// does: a malformed document is an internal error.
func decodeDoc[T any](key string, b []byte, v *T) error {
	if err := json.Unmarshal(b, v); err != nil {
		return sdk.Internal("key %q holds a malformed document: %v", key, err)
	}
	return nil
}
