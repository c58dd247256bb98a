module github.com/proxysinks/proxysinks/incremental

go 1.26
