module github.com/proxysinks/proxysinks/dataplane

go 1.26.0

replace github.com/proxysinks/proxysinks/netlinkraw => ../netlinkraw

require github.com/proxysinks/proxysinks/netlinkraw v0.0.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/proxysinks/proxysinks/client v0.0.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/mdlayher/netlink v1.11.2 // indirect
	github.com/ti-mo/netfilter v0.5.3 // indirect
)

require (
	github.com/jsimonetti/rtnetlink/v2 v2.3.0 // indirect
	github.com/mdlayher/genetlink v1.4.0 // indirect
	github.com/mdlayher/socket v0.6.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/proxysinks/proxysinks/host v0.0.0
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
)

replace github.com/proxysinks/proxysinks/client => ../client

replace github.com/proxysinks/proxysinks/host => ../host
