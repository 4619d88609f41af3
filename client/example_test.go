package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/writ-dev/writ/client"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
)

// A client over three nodes: it prefers the leader and fails over.
func ExampleNew() {
	c, err := client.New(client.Config{
		Endpoints:      []string{"10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"},
		RequestTimeout: 5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}

// Submit a request and act on its outcome. An Uncertain outcome carries the
// request ID: look it up later, or retry with the same ID.
func ExampleClient_Submit() {
	c, err := client.New(client.Config{Endpoints: []string{"127.0.0.1:7070"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	o, err := c.Submit(ctx, "job.submit", []byte(`{"job_id":"j1","queue":"q1","priority":1,"command":"run"}`))
	switch o.Status {
	case client.Committed:
		fmt.Printf("committed %s at %d: %s\n", o.RequestID, o.Index, o.Result)
	case client.Rejected:
		fmt.Printf("rejected (field %q): %s\n", o.Field, o.Reason)
	case client.Unavailable:
		fmt.Println("not appended, safe to retry:", o.Reason)
	case client.Uncertain:
		// the same ID again is safe: the cluster applies it at most once
		o, err = c.Submit(ctx, "job.submit", []byte(`{"job_id":"j1","queue":"q1","priority":1,"command":"run"}`), client.WithID(o.RequestID))
		fmt.Println(o.Status, err)
	default:
		fmt.Println(o.Status, err)
	}
}

// Submit a payload struct generated from the schema: its entry type name
// travels with it.
func ExampleSubmitTyped() {
	c, err := client.New(client.Config{Endpoints: []string{"127.0.0.1:7070"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	o, err := client.SubmitTyped(context.Background(), c, jobsgen.JobSubmit{JobID: "j1", Queue: "q1", Priority: 1, Command: "run"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(o.Status, o.Index)
}

// Look up a request whose outcome was Uncertain.
func ExampleClient_Outcome() {
	c, err := client.New(client.Config{Endpoints: []string{"127.0.0.1:7070"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	o, err := c.Outcome(context.Background(), "r-0123456789abcdef0123456789abcdef")
	if err != nil {
		log.Fatal(err)
	}
	if !o.Known {
		fmt.Println("no recorded outcome")
		return
	}
	fmt.Println(o.Status, o.Index)
}

// Watch committed job submissions; the watch resumes on another endpoint
// by itself when the one it reads from fails.
func ExampleClient_Watch() {
	c, err := client.New(client.Config{Endpoints: []string{"10.0.0.1:7070", "10.0.0.2:7070"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w, err := c.Watch(context.Background(), client.WatchOptions{FromIndex: 1, Types: []string{"job.submit"}})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	for {
		ev, err := w.Recv()
		if errors.Is(err, context.Canceled) {
			return
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Index, ev.Key, ev.Status)
	}
}
