module github.com/proxysinks/proxysinks/bench

go 1.26.0

require (
	github.com/moby/ipvs v1.1.0
	github.com/proxysinks/proxysinks/netlinkraw v0.0.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/mdlayher/genetlink v1.4.0 // indirect
	github.com/mdlayher/netlink v1.11.2 // indirect
	github.com/mdlayher/socket v0.6.0 // indirect
	github.com/sirupsen/logrus v1.9.0 // indirect
	github.com/vishvananda/netlink v1.1.0 // indirect
	github.com/vishvananda/netns v0.0.2 // indirect
	golang.org/x/net v0.53.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
)

replace github.com/proxysinks/proxysinks/netlinkraw => ../netlinkraw
