module github.com/proxysinks/proxysinks/bench

go 1.26.0

require (
	github.com/moby/ipvs v1.1.0
	github.com/proxysinks/proxysinks/netlinkraw v0.0.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/jsimonetti/rtnetlink/v2 v2.3.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/ti-mo/conntrack v0.6.0 // indirect
	github.com/ti-mo/netfilter v0.5.3 // indirect
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/mdlayher/genetlink v1.4.0 // indirect
	github.com/mdlayher/netlink v1.11.2 // indirect
	github.com/mdlayher/socket v0.6.0 // indirect
	github.com/proxysinks/proxysinks/client v0.0.0
	github.com/proxysinks/proxysinks/dataplane v0.0.0
	github.com/proxysinks/proxysinks/fullstate v0.0.0
	github.com/proxysinks/proxysinks/host v0.0.0
	github.com/proxysinks/proxysinks/incremental v0.0.0
	github.com/sirupsen/logrus v1.9.0 // indirect
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
)

replace github.com/proxysinks/proxysinks/netlinkraw => ../netlinkraw

replace github.com/proxysinks/proxysinks/client => ../client

replace github.com/proxysinks/proxysinks/dataplane => ../dataplane

replace github.com/proxysinks/proxysinks/fullstate => ../fullstate

replace github.com/proxysinks/proxysinks/incremental => ../incremental

replace github.com/proxysinks/proxysinks/host => ../host
