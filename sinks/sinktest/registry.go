package sinktest

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Describing is a Registerer that keeps the description (Desc.String) of
// every metric registered through it: a test compares what a sink's build
// registers with what its runtime.Sink.Metrics lists for the reference.
type Describing struct {
	prometheus.Registerer
	descs []string
}

// NewDescribing returns a Describing over a new registry.
func NewDescribing() *Describing { return &Describing{Registerer: prometheus.NewRegistry()} }

// Register keeps c's descriptions and registers it.
func (d *Describing) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		d.descs = append(d.descs, desc.String())
	}
	return d.Registerer.Register(c)
}

// MustRegister registers cs, panicking on an error.
func (d *Describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

// Descs returns the descriptions kept, sorted.
func (d *Describing) Descs() []string { return slices.Sorted(slices.Values(d.descs)) }
