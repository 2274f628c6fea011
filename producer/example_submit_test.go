package producer_test

import (
	"context"
	"fmt"
	"log"

	"github.com/nats-io/nats.go"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
)

// A backend service submits a job, streams its tokens and reads the usage.
// (Not run as a test: it needs a NATS server with the zerolayer streams and
// a worker; `zerolayer dev` provides both.)
func Example() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	c, err := producer.New(nc, producer.Config{Tenant: "acme", Models: map[string]string{"stories260k": "stories260K.gguf"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	id, err := c.Submit(ctx, &contracts.JobRequest{
		Model:    "stories260k",
		Messages: []contracts.Message{{Role: "user", Content: "Once upon a time"}},
		Stream:   true,
		Metadata: map[string]string{"custom_id": "doc-1"},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	events, done, err := c.Events(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	for ev := range events {
		switch ev.Type {
		case contracts.EventDelta:
			fmt.Print(ev.Text)
		case contracts.EventFinal:
			fmt.Printf("\n%d tokens, first after %.1f ms\n", ev.Usage.OutputTokens, ev.Usage.TimeToFirstTokenMs)
		case contracts.EventError:
			log.Printf("job failed: %s: %s", ev.Error.Code, ev.Error.Message)
		}
	}
	if err := done(); err != nil {
		log.Fatal(err)
	}
}
