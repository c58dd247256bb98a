module github.com/proxysinks/proxysinks/iptables

go 1.26.0

replace (
	github.com/proxysinks/proxysinks/client => ../client
	github.com/proxysinks/proxysinks/dataplane => ../dataplane
	github.com/proxysinks/proxysinks/netlinkraw => ../netlinkraw
)

require (
	github.com/proxysinks/proxysinks/client v0.0.0
	github.com/proxysinks/proxysinks/dataplane v0.0.0
)
