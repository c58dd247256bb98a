package iptables

import (
	"errors"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/host/xtables"
)

type fakeVersion struct {
	v   string
	err error
}

func (f fakeVersion) GetVersion() (string, error) { return f.v, f.err }

type fakeKernel struct{ err error }

func (f fakeKernel) IsCompatible() error { return f.err }

func TestCanUseIPTablesProxier(t *testing.T) {
	noKernel := errors.New("no route_localnet")
	for _, tc := range []struct {
		v       fakeVersion
		k       fakeKernel
		ok      bool
		errText string
	}{
		{fakeVersion{v: "1.8.9"}, fakeKernel{}, true, ""},
		{fakeVersion{v: "1.4.11"}, fakeKernel{}, true, ""},
		{fakeVersion{v: "1.4.10"}, fakeKernel{}, false, "older than 1.4.11"},
		{fakeVersion{v: "1.8"}, fakeKernel{}, false, "malformed version"},
		{fakeVersion{err: errors.New("boom")}, fakeKernel{}, false, "boom"},
		{fakeVersion{v: "1.8.9"}, fakeKernel{noKernel}, false, "no route_localnet"},
	} {
		ok, err := CanUseIPTablesProxier(tc.v, tc.k)
		if ok != tc.ok || (tc.errText == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.errText) {
			t.Errorf("%+v %+v: got %v, %v; want %v and an error containing %q", tc.v, tc.k, ok, err, tc.ok, tc.errText)
		}
	}
}

func TestExecVersioner(t *testing.T) {
	run := func(name string, args []string, _ []byte) ([]byte, error) {
		if name != "iptables-nft" || strings.Join(args, " ") != "--version" {
			t.Errorf("ran %s %v", name, args)
		}
		return []byte("iptables v1.8.9 (nf_tables)\n"), nil
	}
	v, err := ExecVersioner{Backend: xtables.NFT, Run: run}.GetVersion()
	if err != nil || v != "1.8.9" {
		t.Errorf("got %q, %v; want 1.8.9", v, err)
	}
}
