module github.com/proxysinks/proxysinks/e2e

go 1.26
