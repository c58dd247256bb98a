module github.com/proxysinks/proxysinks/iptables

go 1.26
