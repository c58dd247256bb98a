module github.com/proxysinks/proxysinks/dataplane

go 1.26
