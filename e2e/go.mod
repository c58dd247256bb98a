module github.com/proxysinks/proxysinks/e2e

go 1.26.0

require (
	github.com/mdlayher/genetlink v1.4.0
	github.com/mdlayher/netlink v1.11.2
	github.com/proxysinks/proxysinks/netlinkraw v0.0.0
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/mdlayher/socket v0.6.0 // indirect
	golang.org/x/net v0.53.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/proxysinks/proxysinks/netlinkraw => ../netlinkraw
