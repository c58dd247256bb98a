module github.com/proxysinks/proxysinks/bench

go 1.26

require (
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/sys v0.50.0
)
