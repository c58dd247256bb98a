module github.com/proxysinks/proxysinks/sinks

go 1.26
