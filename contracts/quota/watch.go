package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
)

// bucketRetry is how often a Checker looks again for a ZL_LIMITS bucket
// that does not exist yet.
const bucketRetry = 5 * time.Second

// Start loads every tenant's limits from ZL_LIMITS and follows their
// changes in the background; it returns once the current values are
// applied, or ctx ends. When the bucket does not exist yet (billing has
// not created it), Start returns at once, the Checker admits everything,
// and it looks for the bucket again every 5 seconds. With
// Config.ReleaseOnResults it also subscribes to the results. Starting
// twice does nothing.
func (c *Checker) Start(ctx context.Context) error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.started {
		return nil
	}
	if c.nc == nil {
		return errors.New("quota: Start needs a NATS connection; New was given none")
	}
	js, err := jetstream.New(c.nc)
	if err != nil {
		return err
	}
	if c.cfg.ReleaseOnResults {
		c.sub, err = c.nc.Subscribe(contracts.SubjectResultsAll, c.onResult)
		if err != nil {
			return fmt.Errorf("quota: subscribe to results: %w", err)
		}
	}
	c.quit, c.done = make(chan struct{}), make(chan struct{})
	c.started = true
	kv, err := js.KeyValue(ctx, contracts.TenantLimitsBucket)
	if err == nil {
		initial := make(chan struct{})
		go c.follow(kv, initial)
		select {
		case <-initial:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		c.stopLocked()
		return fmt.Errorf("quota: open the %s bucket: %w", contracts.TenantLimitsBucket, err)
	}
	c.cfg.Logger.Warn("quota: no tenant-limits bucket yet; admitting every job until billing creates it", "bucket", contracts.TenantLimitsBucket)
	go func() {
		t := time.NewTicker(bucketRetry)
		defer t.Stop()
		for {
			select {
			case <-c.quit:
				close(c.done)
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), bucketRetry)
				kv, err := js.KeyValue(ctx, contracts.TenantLimitsBucket)
				cancel()
				if err == nil {
					c.follow(kv, make(chan struct{}))
					return
				}
			}
		}
	}()
	return nil
}

// follow applies the bucket's values until Stop; it closes initial once
// the values present at the start are applied, and c.done at the end.
func (c *Checker) follow(kv jetstream.KeyValue, initial chan struct{}) {
	defer close(c.done)
	w, err := kv.WatchAll(context.Background())
	if err != nil {
		c.cfg.Logger.Error("quota: watch the tenant limits", "err", err)
		close(initial)
		return
	}
	defer w.Stop()
	loaded := false
	for {
		select {
		case <-c.quit:
			if !loaded {
				close(initial)
			}
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				if !loaded {
					loaded = true
					close(initial)
				}
				continue
			}
			c.apply(e)
		}
	}
}

// apply applies one bucket entry.
func (c *Checker) apply(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		c.Clear(e.Key())
		return
	}
	l, err := contracts.DecodeTenantLimits(e.Value())
	if err != nil || l.Tenant != e.Key() {
		// Keep the last good limits rather than dropping them.
		c.cfg.Logger.Error("quota: unreadable tenant limits; keeping the previous ones", "tenant", e.Key(), "err", err)
		return
	}
	c.Set(l)
}

// onResult releases the job a result finishes.
func (c *Checker) onResult(m *nats.Msg) {
	var r struct {
		JobID  string `json:"job_id"`
		Tenant string `json:"tenant"`
	}
	if json.Unmarshal(m.Data, &r) == nil {
		c.Release(r.Tenant, r.JobID)
	}
}

// Stop stops following the limits (the last ones stay in force) and
// unsubscribes from the results. It is idempotent; ctx bounds the wait
// for the background goroutine.
func (c *Checker) Stop(ctx context.Context) error {
	c.life.Lock()
	if !c.started || c.stopped {
		c.life.Unlock()
		return nil
	}
	c.stopLocked()
	done := c.done
	c.life.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopLocked signals the background goroutine to end. c.life is held.
func (c *Checker) stopLocked() {
	c.stopped = true
	close(c.quit)
	if c.sub != nil {
		c.sub.Unsubscribe()
	}
}
