package xtables

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

func TestCommand(t *testing.T) {
	tests := []struct {
		b    Backend
		f    Family
		tool string
		want string
		args []string
	}{
		{NFT, IPv4, "save", "iptables-nft-save", []string{"--noflush"}},
		{NFT, IPv6, "restore", "ip6tables-nft-restore", []string{"--noflush"}},
		{Legacy, IPv4, "restore", "iptables-legacy-restore", []string{"-w", "5", "--noflush"}},
		{Legacy, IPv6, "save", "ip6tables-legacy-save", []string{"-w", "5", "--noflush"}},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.b.Command(tt.f, tt.tool); got != tt.want {
				t.Errorf("%s.Command(%s, %s) = %s, want %s", tt.b, tt.f, tt.tool, got, tt.want)
			}
			if diff := cmp.Diff(tt.args, tt.b.RestoreArgs()); diff != "" {
				t.Errorf("%s.RestoreArgs() (-want +got):\n%s", tt.b, diff)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	saves := func(nft, legacy string) Runner {
		return func(name string, _ []string, _ []byte) ([]byte, error) {
			switch name {
			case "iptables-nft-save":
				return []byte(nft), nil
			case "iptables-legacy-save":
				if legacy == "missing" {
					return nil, exec.ErrNotFound
				}
				return []byte(legacy), nil
			}
			return nil, exec.ErrNotFound
		}
	}
	tests := []struct {
		name        string
		nft, legacy string
		want        Backend
	}{
		{"empty node", "", "", NFT},
		{"hint chain in legacy", "-A INPUT -j ACCEPT\n", "*mangle\n:KUBE-IPTABLES-HINT - [0:0]\n", Legacy},
		{"canary chain in nft", "*mangle\n:KUBE-KUBELET-CANARY - [0:0]\n", "-A INPUT -j ACCEPT\n", NFT},
		{"more rules in legacy", "-A INPUT -j ACCEPT\n", "-A INPUT -j ACCEPT\n-A FORWARD -j ACCEPT\n", Legacy},
		{"legacy tools missing", "", "missing", NFT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Detect(IPv4, saves(tt.nft, tt.legacy)); err != nil || got != tt.want {
				t.Errorf("Detect = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestDetectKernel(t *testing.T) {
	nstest.LookPath(t, "iptables-legacy-save")
	nstest.LookPath(t, "iptables-nft-save")
	ns := nstest.New(t)
	run := ExecWith(ns.Do)
	if got, err := Detect(IPv4, run); err != nil || got != NFT {
		t.Errorf("empty node: Detect = %q, %v; want nft", got, err)
	}
	ns.MustRun(t, "iptables-legacy", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT")
	if got, err := Detect(IPv4, run); err != nil || got != Legacy {
		t.Errorf("legacy hint chain: Detect = %q, %v; want legacy", got, err)
	}
	ns2 := nstest.New(t)
	ns2.MustRun(t, "iptables-legacy", "-A", "INPUT", "-p", "tcp", "-j", "ACCEPT")
	if got, err := Detect(IPv4, ExecWith(ns2.Do)); err != nil || got != Legacy {
		t.Errorf("rules only in legacy: Detect = %q, %v; want legacy", got, err)
	}
	fail := func(string, []string, []byte) ([]byte, error) { return nil, exec.ErrNotFound }
	if _, err := Detect(IPv4, fail); err == nil || !strings.Contains(err.Error(), "no usable iptables for IPv4") {
		t.Errorf("no tools: Detect error = %v", err)
	}
}
