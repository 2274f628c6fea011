package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// RateBatchArgs is the River job that prices many stored usage records at
// once. An ingester with RateInBatches set inserts one in each transaction
// that stores records, naming them; it costs River one job where RateArgs
// costs one per record. The records are charged in one transaction; one
// the job cannot rate yet (no price book in force) is then handed to a
// RateArgs job of its own, which River retries on its own schedule.
type RateBatchArgs struct {
	// Jobs are the records to price.
	Jobs []JobRef `json:"jobs"`
}

// Kind implements river.JobArgs.
func (RateBatchArgs) Kind() string { return "zl_billing_rate_batch" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RateBatchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: RateQueue, Priority: 1}
}

// rateBatchWorker prices the records of a RateBatchArgs job (rater). A
// charge is unique on the tenant and job id and a job with a charge
// already is left alone, so a batch run again after a failure (or after a
// crash between the rating and the hand-over of the records it could not
// rate) bills nothing twice.
type rateBatchWorker struct {
	river.WorkerDefaults[RateBatchArgs]
	*rater
}

func (w *rateBatchWorker) Work(ctx context.Context, job *river.Job[RateBatchArgs]) error {
	errs, err := w.rate(ctx, job.Args.Jobs)
	if err != nil {
		return err
	}
	var alone []river.InsertManyParams
	for i, err := range errs {
		// A record that is not stored has nothing to bill.
		if err != nil && !errors.Is(err, ErrNotFound) {
			j := job.Args.Jobs[i]
			alone = append(alone, river.InsertManyParams{Args: RateArgs(j)})
		}
	}
	if len(alone) == 0 {
		return nil
	}
	if _, err := river.ClientFromContext[pgx.Tx](ctx).InsertMany(ctx, alone); err != nil {
		return fmt.Errorf("billing: hand %d records of a rating batch to jobs of their own: %w", len(alone), err)
	}
	return nil
}
