package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
)

// The worker's announcement. From Start until Stop a worker rewrites its
// entry in the ZL_WORKERS bucket (contracts.WorkerInfo: its id, its
// models with their context and KV arena sizes, when it started) every
// HeartbeatInterval, and each of its models' entries in ZL_MODELS
// (contracts.ModelRecord), which outlive it by contracts.ModelsTTL.
// Producers and the gateway follow both (contracts/fleet): a job for a
// model no live worker serves, nor served lately, is refused at submit
// while workers are live, unless its client asked to wait for one. Stop
// deletes the worker's entry; one that dies leaves it to expire after
// contracts.WorkersTTL.

// heartbeat is the worker's announcement state; only Start, the beat
// goroutine and Stop touch it, in that order.
type heartbeat struct {
	workers, models jetstream.KeyValue
	key             string
	info            contracts.WorkerInfo
	stop            chan struct{}
	done            chan struct{}
}

// startHeartbeat binds (or creates) the fleet's buckets, announces the
// worker once and starts the beat.
func (w *Worker) startHeartbeat(ctx context.Context) error {
	hb := &w.beat
	var err error
	if hb.workers, err = w.fleetBucket(ctx, w.cfg.Streams.WorkersBucketConfig()); err != nil {
		return err
	}
	if hb.models, err = w.fleetBucket(ctx, w.cfg.Streams.ModelsBucketConfig()); err != nil {
		return err
	}
	hb.key = contracts.ModelToken(w.cfg.ID)
	hb.info = contracts.WorkerInfo{WorkerID: w.cfg.ID, Device: w.exec.Device(), StartedAt: time.Now().UTC()}
	for _, name := range w.cfg.Models {
		m := contracts.WorkerModel{Name: name}
		for _, i := range w.infos {
			if i.Name == name {
				m.ContextTokens, m.KVArenaMB, m.EmbeddingOnly = i.Context, i.KVArenaMB, i.EmbeddingOnly
			}
		}
		hb.info.Models = append(hb.info.Models, m)
	}
	if err := w.announce(ctx); err != nil {
		return fmt.Errorf("worker: announcing the served models in %s: %w", contracts.WorkersBucket, err)
	}
	hb.stop, hb.done = make(chan struct{}), make(chan struct{})
	go w.beatLoop(hb.stop, hb.done)
	return nil
}

// fleetBucket binds the bucket of kc, creating it when it does not exist
// (a worker need not provision to announce itself; one that exists is
// taken as it is).
func (w *Worker) fleetBucket(ctx context.Context, kc jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := w.js.KeyValue(ctx, kc.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = w.js.CreateKeyValue(ctx, kc)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = w.js.KeyValue(ctx, kc.Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("worker: key-value bucket %s: %w", kc.Bucket, err)
	}
	return kv, nil
}

// announce writes the worker's entry and its models'.
func (w *Worker) announce(ctx context.Context) error {
	hb := &w.beat
	now := time.Now().UTC()
	hb.info.UpdatedAt = now
	b, err := json.Marshal(&hb.info)
	if err != nil {
		return err
	}
	if _, err := hb.workers.Put(ctx, hb.key, b); err != nil {
		return err
	}
	for _, m := range hb.info.Models {
		b, err := json.Marshal(&contracts.ModelRecord{Model: m.Name, WorkerID: w.cfg.ID, ServedAt: now})
		if err != nil {
			return err
		}
		if _, err := hb.models.Put(ctx, contracts.ModelToken(m.Name), b); err != nil {
			return err
		}
	}
	return nil
}

// beatLoop announces the worker every HeartbeatInterval until stop is
// closed, then deletes its entry.
func (w *Worker) beatLoop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := w.beat.workers.Delete(ctx, w.beat.key); err != nil {
				w.log.Warn("removing the worker from the fleet; it expires instead", "bucket", contracts.WorkersBucket, "err", err)
			}
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), w.cfg.HeartbeatInterval)
			if err := w.announce(ctx); err != nil {
				w.log.Warn("heartbeat failed", "bucket", contracts.WorkersBucket, "err", err)
			}
			cancel()
		}
	}
}

// stopHeartbeat ends the beat and removes the worker's entry.
func (w *Worker) stopHeartbeat() {
	if w.beat.stop == nil {
		return
	}
	close(w.beat.stop)
	<-w.beat.done
	w.beat.stop = nil
}

// serves reports whether the worker pulls jobs for model.
func (w *Worker) serves(model string) bool {
	name, ok := w.byToken[contracts.ModelToken(model)]
	return ok && name == model
}
