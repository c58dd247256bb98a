// Package monitoring tests deploy/monitoring: the sinks' Prometheus rules
// (promtool check rules and promtool test rules), the PrometheusRule kept
// equal to them, the PodMonitor against the DaemonSet of deploy/base, the
// Grafana dashboard, and that every metric they and kube-prometheus's
// kube-proxy monitoring name is one the sinks export (as
// docs/reference/metrics.md lists them) or is documented as missing. It has
// no code of its own.
package monitoring
