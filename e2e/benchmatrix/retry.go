package benchmatrix

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// createAttempts bounds the tries of one create: an apiserver whose etcd
// is slow (loading 50,000 services on a busy 2-core machine) answers some
// writes with "etcdserver: request timed out" and then serves the next.
const createAttempts = 8

// transient reports whether a write that failed with err may succeed
// when tried again: the apiserver's or etcd's timeouts, throttling and
// unavailability.
func transient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err)
}

// createRetrying calls create until it succeeds, fails with an error that
// is not transient, or has been tried createAttempts times, waiting
// 0.5 s, 1 s, 2 s... (at most 10 s) between tries. A retry that finds the
// object already there counts as created: the timed-out try may have
// written it. what names the object in the error.
func createRetrying(ctx context.Context, what string, create func() error) error {
	wait := 500 * time.Millisecond
	var err error
	for try := 1; ; try++ {
		err = create()
		switch {
		case err == nil:
			return nil
		case try > 1 && apierrors.IsAlreadyExists(err):
			return nil
		case !transient(err) || try == createAttempts:
			return fmt.Errorf("benchmatrix: create %s (try %d of %d): %w", what, try, createAttempts, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("benchmatrix: create %s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}
