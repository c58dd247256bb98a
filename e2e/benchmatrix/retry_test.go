package benchmatrix

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCreateRetrying(t *testing.T) {
	svc := schema.GroupResource{Resource: "services"}
	timeout := apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	exists := apierrors.NewAlreadyExists(svc, "svc-00001")
	invalid := apierrors.NewBadRequest("spec.clusterIP: invalid")
	for _, tc := range []struct {
		name    string
		answers []error // the create's results, in order; nil: created
		tries   int
		wantErr bool
	}{
		{"created at once", []error{nil}, 1, false},
		{"timeout, then created", []error{timeout, nil}, 2, false},
		{"timeout, then already there: the first try wrote it", []error{timeout, exists}, 2, false},
		{"already there at the first try is an error", []error{exists}, 1, true},
		{"not transient: no retry", []error{invalid, nil}, 1, true},
		{"throttled, then unavailable, then created", []error{apierrors.NewTooManyRequests("slow down", 0), apierrors.NewServiceUnavailable("starting"), nil}, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			err := createRetrying(context.Background(), "service svc-00001", func() error {
				tries++
				return tc.answers[tries-1]
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.tries, tries); diff != "" {
				t.Errorf("tries (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCreateRetryingGivesUp(t *testing.T) {
	tries := 0
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := createRetrying(ctx, "service svc-00002", func() error {
		tries++
		return apierrors.NewServerTimeout(schema.GroupResource{Resource: "services"}, "create", 1)
	})
	if err == nil || tries != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err %v after %d tries, want context.Canceled after 1", err, tries)
	}
}
