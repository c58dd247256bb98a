module github.com/proxysinks/proxysinks/client

go 1.26
