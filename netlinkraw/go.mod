module github.com/proxysinks/proxysinks/netlinkraw

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/jsimonetti/rtnetlink/v2 v2.3.0
	github.com/mdlayher/genetlink v1.4.0
	github.com/mdlayher/netlink v1.11.2
	golang.org/x/sys v0.50.0
)

require (
	github.com/google/nftables v0.3.0 // indirect
	github.com/mdlayher/socket v0.6.0 // indirect
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
)
