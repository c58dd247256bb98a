package httpserve

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/sinks/healthcheck"
)

// TestSourceStale: the source's staleness is a metric and is named by
// /healthz, which stays healthy while the kernel keeps the last good state
// (health follows queued changes and syncs, package healthcheck).
func TestSourceStale(t *testing.T) {
	st := client.Stats{Stale: true, StaleReason: "m.yaml: reads as empty", Invalid: 2, InvalidTotal: 5, RepairedValuesTotal: 3, SkippedValuesTotal: 4}
	m := NewMetrics()
	m.WatchSource(func() client.Stats { return st })
	h := healthcheck.NewProxyHealth(time.Minute, nil)
	h.SetSource(func() (bool, string) { return st.Stale, st.StaleReason })
	srv := Handler(m, h, "ipvs")

	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	_, body := get("/metrics")
	for _, want := range []string{"proxysinks_source_stale 1", "proxysinks_source_invalid_objects 2", "proxysinks_source_invalid_objects_total 5",
		"proxysinks_source_repaired_values_total 3", "proxysinks_source_skipped_values_total 4"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, body := get("/healthz"); code != 200 || !strings.Contains(body, `"sourceStale":"m.yaml: reads as empty"`) {
		t.Errorf("stale, nothing queued: /healthz %d %s; want 200 naming the stale source", code, body)
	}
	h.Queued()
	h.Updated()
	if code, body := get("/healthz"); code != 200 || !strings.Contains(body, "sourceStale") {
		t.Errorf("stale after a sync: /healthz %d %s; want 200 naming the stale source", code, body)
	}
	st = client.Stats{}
	if _, body := get("/metrics"); !strings.Contains(body, "proxysinks_source_stale 0") {
		t.Errorf("trustworthy source: /metrics lacks proxysinks_source_stale 0")
	}
	if code, body := get("/healthz"); code != 200 || strings.Contains(body, "sourceStale") {
		t.Errorf("trustworthy source: /healthz %d %s", code, body)
	}
}
