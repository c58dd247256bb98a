package iptablessink

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/proxysinks/proxysinks/iptables"
	"github.com/proxysinks/proxysinks/netlinkraw/nfacct"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
)

// acctMetrics are kube-proxy's metrics read from its nfacct objects, per
// object name.
var acctMetrics = []struct{ object, name, help string }{
	{iptables.AcctInvalidDropped, "kubeproxy_iptables_ct_state_invalid_dropped_packets_total", "packets dropped by iptables to work around conntrack problems"},
	{iptables.AcctLocalhostNodePorts, "kubeproxy_iptables_localhost_nodeports_accepted_packets_total", "Number of packets accepted on nodeports of loopback interface"},
}

// acctReader reads an nfacct object (nfacct.Conn).
type acctReader interface {
	Get(name string) (nfacct.Counter, error)
}

// AcctCollector exports the packets of kube-proxy's nfacct objects at
// every scrape, as kube-proxy does: an object that cannot be read is left
// out of the scrape (logged).
type AcctCollector struct {
	mu    sync.Mutex
	r     acctReader
	descs []*prometheus.Desc
	log   *slog.Logger
}

// NewAcctCollector returns the collector reading through r.
func NewAcctCollector(r acctReader, log *slog.Logger) *AcctCollector {
	c := &AcctCollector{r: r, log: log}
	for _, m := range acctMetrics {
		c.descs = append(c.descs, prometheus.NewDesc(m.name, m.help, nil, nil))
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *AcctCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one netlink request per object.
func (c *AcctCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range acctMetrics {
		ctr, err := c.r.Get(m.object)
		if err != nil {
			c.log.Debug("nfacct counter not collected", "counter", m.object, "error", err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, float64(ctr.Packets))
	}
}

// dialAccounting opens two nfacct connections, one the Proxier ensures the
// objects through, one the collector reads through (registered in reg),
// and returns the first and a closer of both.
func dialAccounting(reg prometheus.Registerer, log *slog.Logger) (iptables.Accounting, func(), error) {
	w, err := nfacct.Dial(nil)
	if err != nil {
		return nil, nil, err
	}
	r, err := nfacct.Dial(nil)
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	closeAll := func() { w.Close(); r.Close() }
	if reg != nil {
		if err := reg.Register(NewAcctCollector(r, log)); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("register nfacct metrics: %w", err)
		}
	}
	return w, closeAll, nil
}

// zeroCounters reads every nfacct object as zero packets.
type zeroCounters struct{}

// Get returns a counter of zero packets named name.
func (zeroCounters) Get(name string) (nfacct.Counter, error) { return nfacct.Counter{Name: name}, nil }

// referenceMetrics registers the sink's metrics in reg as build does
// (NewMetrics, the nfacct collector), reading no kernel (runtime.Sink's
// Metrics).
func referenceMetrics(reg prometheus.Registerer, _ func(httpserve.TextSource)) error {
	if _, err := NewMetrics(reg); err != nil {
		return err
	}
	if err := reg.Register(NewAcctCollector(zeroCounters{}, slog.New(slog.DiscardHandler))); err != nil {
		return fmt.Errorf("register nfacct metrics: %w", err)
	}
	return nil
}
