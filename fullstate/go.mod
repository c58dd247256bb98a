module github.com/proxysinks/proxysinks/fullstate

go 1.26

require github.com/google/go-cmp v0.7.0
