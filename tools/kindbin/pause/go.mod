// Module pause is the pod sandbox image's process (see scripts/kindbin.sh).
module github.com/proxysinks/proxysinks/tools/kindbin/pause

go 1.26.0
