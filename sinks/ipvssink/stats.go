package ipvssink

import (
	"net/netip"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
)

// ServiceDumper lists IPVS virtual servers with their counters
// (*ipvs.Conn does: one netlink dump).
type ServiceDumper interface {
	Services() ([]ipvs.ServiceEntry, error)
}

// Stats exports IPVS's per-virtual-server counters (--ipvs-stats):
// connections, packets and bytes, from one dump per scrape. Each virtual
// server gives one set of series, labelled by protocol, address and port
// (a firewall-mark server: protocol "FWM", address empty, port the mark).
// At 10,000 virtual servers a scrape has 50,000 series: they are written
// straight in the text exposition format (AppendText), which costs a
// tenth of building them through client_golang (BenchmarkStatsScrape).
type Stats struct {
	d ServiceDumper

	mu     sync.Mutex
	errors uint64
}

// NewStats returns the statistics of the virtual servers d dumps.
func NewStats(d ServiceDumper) *Stats { return &Stats{d: d} }

// The metrics Stats exports.
const (
	statsConns   = "proxysinks_ipvs_virtual_server_connections_total"
	statsPackets = "proxysinks_ipvs_virtual_server_packets_total"
	statsBytes   = "proxysinks_ipvs_virtual_server_bytes_total"
	statsErrors  = "proxysinks_ipvs_stats_errors_total"
)

// AppendText dumps the virtual servers once and appends their series to
// dst in the text exposition format (version 0.0.4), with
// proxysinks_ipvs_stats_errors_total, the scrapes whose dump failed (they
// have no per-server series).
func (s *Stats) AppendText(dst []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := s.d.Services()
	if err != nil {
		entries = nil
		s.errors++
	}
	// Each server's labels, written once.
	labels := make([][]byte, len(entries))
	var buf []byte
	for i, e := range entries {
		start := len(buf)
		buf = appendLabels(buf, e.Service)
		labels[i] = buf[start:len(buf):len(buf)]
	}
	dst = append(dst, "# HELP "+statsConns+" Connections IPVS scheduled to the virtual server's destinations.\n# TYPE "+statsConns+" counter\n"...)
	for i, e := range entries {
		dst = appendSample(dst, statsConns, labels[i], "", e.Stats.Connections)
	}
	dst = append(dst, "# HELP "+statsPackets+" Packets through the virtual server, by direction (in: from clients, out: replies).\n# TYPE "+statsPackets+" counter\n"...)
	for i, e := range entries {
		dst = appendSample(dst, statsPackets, labels[i], "in", e.Stats.PacketsIn)
		dst = appendSample(dst, statsPackets, labels[i], "out", e.Stats.PacketsOut)
	}
	dst = append(dst, "# HELP "+statsBytes+" Bytes through the virtual server, by direction (in: from clients, out: replies).\n# TYPE "+statsBytes+" counter\n"...)
	for i, e := range entries {
		dst = appendSample(dst, statsBytes, labels[i], "in", e.Stats.BytesIn)
		dst = appendSample(dst, statsBytes, labels[i], "out", e.Stats.BytesOut)
	}
	dst = append(dst, "# HELP "+statsErrors+" Scrapes whose dump of the IPVS virtual servers failed (they export no per-server series).\n# TYPE "+statsErrors+" counter\n"+statsErrors+" "...)
	dst = strconv.AppendUint(dst, s.errors, 10)
	return append(dst, '\n')
}

// appendLabels appends a virtual server's labels, without braces:
// address, port, protocol. None of the values needs escaping.
func appendLabels(dst []byte, s ipvs.Service) []byte {
	proto, port := s.Protocol.String(), uint64(s.Port)
	dst = append(dst, `address="`...)
	if s.FWMark != 0 {
		proto, port = "FWM", uint64(s.FWMark)
	} else {
		dst = s.Address.AppendTo(dst)
	}
	dst = append(dst, `",port="`...)
	dst = strconv.AppendUint(dst, port, 10)
	dst = append(dst, `",protocol="`...)
	dst = append(dst, proto...)
	return append(dst, '"')
}

// appendSample appends one sample line: name{labels[,direction]} v.
func appendSample(dst []byte, name string, labels []byte, direction string, v uint64) []byte {
	dst = append(dst, name...)
	dst = append(dst, '{')
	dst = append(dst, labels...)
	if direction != "" {
		dst = append(dst, `,direction="`...)
		dst = append(dst, direction...)
		dst = append(dst, '"')
	}
	dst = append(dst, "} "...)
	dst = strconv.AppendUint(dst, v, 10)
	return append(dst, '\n')
}

// oneServer dumps one TCP virtual server with zero counters.
type oneServer struct{}

// Services returns one TCP virtual server, 10.96.0.1:80.
func (oneServer) Services() ([]ipvs.ServiceEntry, error) {
	return []ipvs.ServiceEntry{{Service: ipvs.Service{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.1"), Port: 80}}}, nil
}

// referenceMetrics adds the metrics --ipvs-stats adds, as build does
// (Stats.AppendText), from a dump of one server that reads no kernel
// (runtime.Sink's Metrics). The sink registers nothing else of its own.
func referenceMetrics(_ prometheus.Registerer, text func(httpserve.TextSource)) error {
	text(NewStats(oneServer{}).AppendText)
	return nil
}
