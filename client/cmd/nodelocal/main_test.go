package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunExamples(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-node-name", "node-1", "../../../examples/cluster"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"--- snapshot\n",
		"default/web ClusterIP cluster=[10.96.10.10] http/TCP:80->http https/TCP:443->8443\n",
		"    Pod/default/web-6d4b75cb6d-2xq9v [10.244.1.11] local ready serving internal node=node-1 http/TCP=8080 https/TCP=8443\n",
		"eTP=Local healthCheck=32456 sourceRanges=[203.0.113.0/24 198.51.100.7/32]\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "payments-api") || strings.Contains(out.String(), "default/db ") {
		t.Error("ExternalName or headless service printed")
	}
}

func TestRunEvents(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-node-name", "node-1", "-events", "../../../examples/cluster"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if lines[len(lines)-1] != "Sync" || !strings.HasPrefix(lines[0], "SetService default/echo NodePort") {
		t.Errorf("events:\n%s", out.String())
	}
	var services, endpoints int
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "SetService "):
			services++
		case strings.HasPrefix(l, "SetEndpoint "):
			endpoints++
		}
	}
	if services != 9 || endpoints != 18 {
		t.Errorf("%d SetService and %d SetEndpoint, want 9 and 18", services, endpoints)
	}
}
