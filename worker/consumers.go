package worker

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
)

// restore looks up src's consumer after a failed fetch, or again once
// ConsumerRecheck has passed since a lookup found it missing, and reports
// whether the class can be pulled. A consumer deleted by a tenant or an
// operator is recreated from the contract's configuration when the worker
// provisions (the whole stream too, if it is gone); otherwise the class is
// reported missing, in the log once and in the
// zerolayer_intake_consumer_missing gauge until the consumer is back.
func (w *Worker) restore(src *pullSource) bool {
	if src.missing && time.Since(src.checked) < w.cfg.ConsumerRecheck {
		return false
	}
	src.checked = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ConsumerRecheck)
	defer cancel()
	name := contracts.ConsumerName(src.prio, src.bucket)
	log := w.log.With("consumer", name, "stream", contracts.StreamJobs)
	c, err := w.js.Consumer(ctx, contracts.StreamJobs, name)
	switch {
	case err == nil:
		if src.missing {
			log.Info("consumer is back; serving its class again")
		}
		w.found(src, c)
		return true
	case !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound):
		// The server did not say it is gone (a timeout, a leader
		// election): keep pulling and look again on the next failure.
		log.Warn("consumer lookup failed", "err", err)
		return !src.missing
	}
	if w.cfg.Provision {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			err = contracts.EnsureStreams(ctx, w.js, w.cfg.Streams)
		}
		if err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) {
			c, err = w.js.CreateOrUpdateConsumer(ctx, contracts.StreamJobs, w.cfg.Streams.ConsumerConfig(src.prio, src.bucket))
		}
		if err == nil {
			log.Warn("consumer was deleted; recreated it from the contract")
			w.cfg.Metrics.consumerRecreated(src.prio, src.bucket)
			w.found(src, c)
			return true
		}
		log.Error("consumer was deleted and recreating it failed", "err", err)
	} else if !src.missing {
		log.Error("consumer is missing: jobs of this class are not served until it is recreated (run a worker with provisioning on, or contracts.EnsureStreams)")
	}
	if !src.missing {
		w.missing.Add(1)
	}
	src.missing = true
	w.cfg.Metrics.consumerMissing(src.prio, src.bucket, true)
	return false
}

// found records that src's consumer exists as c.
func (w *Worker) found(src *pullSource, c jetstream.Consumer) {
	if src.missing {
		w.missing.Add(-1)
	}
	w.bindConsumer(c)
	src.cons, src.missing = c, false
	w.cfg.Metrics.consumerMissing(src.prio, src.bucket, false)
}
