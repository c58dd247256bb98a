package kube

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
)

// causes logs the errors of the API client once per distinct cause (the
// innermost error of the chain, e.g. "connection refused"): an
// unreachable API server says why at the first failed request, without
// one line per informer and retry. A cause is logged again after another
// one was.
type causes struct {
	log  *slog.Logger
	mu   sync.Mutex
	last string
}

// report logs err unless its cause is the one logged last.
func (c *causes) report(what string, err error) {
	cause := rootCause(err)
	c.mu.Lock()
	seen := c.last == cause
	c.last = cause
	log := c.log
	c.mu.Unlock()
	if !seen && log != nil {
		log.Warn("API server request failed; retrying", "request", what, "cause", cause, "error", err.Error())
	}
}

// rootCause returns the text of the innermost error of err's chain (the
// first of a joined error's).
func rootCause(err error) string {
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if l := u.Unwrap(); len(l) > 0 {
				next = l[0]
			}
		}
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// errorLogger is an HTTP transport that reports the errors of the next
// one (connection refused, TLS, DNS) to causes.
type errorLogger struct {
	next   http.RoundTripper
	causes *causes
}

// RoundTrip is the next transport's, its error reported.
func (e *errorLogger) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := e.next.RoundTrip(req)
	if err != nil && !errors.Is(err, context.Canceled) {
		e.causes.report(req.Method+" "+req.URL.Path, err)
	}
	return resp, err
}

// watchErrors is the informers' list-and-watch error handler: the errors
// client-go would log to klog (an API error such as forbidden, a failed
// list) are reported to causes; a watch that closed or expired is
// normal and silent, as in client-go's default handler.
func (c *causes) watchErrors(what string) cache.WatchErrorHandlerWithContext {
	return func(_ context.Context, _ *cache.Reflector, err error) {
		if err == io.EOF || errors.Is(err, context.Canceled) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return
		}
		c.report(what+" list/watch", err)
	}
}
