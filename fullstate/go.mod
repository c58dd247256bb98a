module github.com/proxysinks/proxysinks/fullstate

go 1.26
