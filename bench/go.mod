module github.com/proxysinks/proxysinks/bench

go 1.26
