package client

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoutingCategorize(t *testing.T) {
	type pick struct{ Cluster, Local bool }
	// Each case: the service's policies, whether the port is accessible,
	// and how endpoints usable only internally, only externally and only
	// cluster-wide are categorized.
	tests := []struct {
		name                 string
		iLocal, eLocal, lb   bool
		accessible           bool
		internal, ext, clust pick
	}{
		{name: "cluster policies", internal: pick{Cluster: true}},
		{name: "iTP Local, not accessible", iLocal: true, internal: pick{Local: true}},
		{name: "iTP Local, accessible", iLocal: true, accessible: true, internal: pick{Local: true}, ext: pick{Cluster: true}},
		{name: "eTP Local, accessible", eLocal: true, lb: true, accessible: true, internal: pick{Cluster: true}, ext: pick{Local: true}},
		{name: "eTP Local, not externally accessible", eLocal: true, accessible: true, internal: pick{Cluster: true}},
		{name: "both Local", iLocal: true, eLocal: true, lb: true, accessible: true, internal: pick{Local: true}, clust: pick{Cluster: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Service{InternalTrafficLocal: tt.iLocal, ExternalTrafficLocal: tt.eLocal}
			if tt.lb {
				s.Type = LoadBalancer
			}
			r := s.Routing(tt.accessible)
			var got [3]pick
			got[0].Cluster, got[0].Local = r.Categorize(true, false, false)
			got[1].Cluster, got[1].Local = r.Categorize(false, true, false)
			got[2].Cluster, got[2].Local = r.Categorize(false, false, true)
			if d := cmp.Diff([3]pick{tt.internal, tt.ext, tt.clust}, got); d != "" {
				t.Errorf("categorized (-want +got):\n%s", d)
			}
		})
	}
}
