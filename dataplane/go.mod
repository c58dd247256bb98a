module github.com/proxysinks/proxysinks/dataplane

go 1.26.0

replace github.com/proxysinks/proxysinks/netlinkraw => ../netlinkraw

require github.com/proxysinks/proxysinks/netlinkraw v0.0.0

require (
	github.com/google/go-cmp v0.7.0
	golang.org/x/sys v0.50.0 // indirect
)
