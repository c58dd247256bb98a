// Package hostile holds the hostile-operator suite of the sink binaries
// (its tests only): every binary under sinks/ is built and run, in a dry
// run, with bad flags and bad manifests, and each case's exit status and
// message are checked. A new sink binary is covered without a new line.
package hostile
