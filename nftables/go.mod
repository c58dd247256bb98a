module github.com/proxysinks/proxysinks/nftables

go 1.26.0

replace (
	github.com/proxysinks/proxysinks/client => ../client
	github.com/proxysinks/proxysinks/host => ../host
	github.com/proxysinks/proxysinks/netlinkraw => ../netlinkraw
)
