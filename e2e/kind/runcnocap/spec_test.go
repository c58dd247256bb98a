package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args                 []string
		cmd, bundle, process string
	}{
		{[]string{"--root", "/run/runc", "--log", "/x/log.json", "--log-format", "json", "create", "--bundle", "/b", "id"}, "create", "/b", ""},
		{[]string{"--systemd-cgroup", "create", "-b", "/b2", "--pid-file", "/p", "id"}, "create", "/b2", ""},
		{[]string{"run", "--bundle=/b3", "id"}, "run", "/b3", ""},
		{[]string{"run", "id"}, "run", ".", ""},
		{[]string{"--root", "/r", "start", "id"}, "start", ".", ""},
		{[]string{"--root", "/r", "exec", "--process", "/tmp/p.json", "--detach", "id"}, "exec", ".", "/tmp/p.json"},
		{[]string{"exec", "--process=/q.json", "id"}, "exec", ".", "/q.json"},
		{[]string{"exec", "id", "ls"}, "exec", ".", ""},
		{[]string{"--version"}, "", "", ""},
	} {
		cmd, bundle, process := parse(tc.args)
		if cmd != tc.cmd || bundle != tc.bundle || process != tc.process {
			t.Errorf("parse(%q) = %q, %q, %q; want %q, %q, %q", tc.args, cmd, bundle, process, tc.cmd, tc.bundle, tc.process)
		}
	}
}

func TestDropCaps(t *testing.T) {
	spec := `{"ociVersion":"1.0.2","process":{"user":{"uid":0,"gid":0},"args":["sh"],"capabilities":{` +
		`"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE","CAP_SYS_ADMIN"],` +
		`"effective":["CAP_SYS_RESOURCE","CAP_SYS_ADMIN"],` +
		`"permitted":["CAP_SYS_ADMIN","CAP_SYS_RESOURCE"],"ambient":null}},` +
		`"linux":{"resources":{"memory":{"limit":123456789012}}}}`
	out, changed, err := dropCaps([]byte(spec), []string{"CAP_SYS_RESOURCE"})
	if err != nil || !changed {
		t.Fatalf("dropCaps = changed %v, %v", changed, err)
	}
	var got map[string]any
	if err := decode(out, &got); err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	wantJSON := `{"ociVersion":"1.0.2","process":{"user":{"uid":0,"gid":0},"args":["sh"],"capabilities":{` +
		`"bounding":["CAP_CHOWN","CAP_SYS_ADMIN"],"effective":["CAP_SYS_ADMIN"],` +
		`"permitted":["CAP_SYS_ADMIN"],"ambient":null}},` +
		`"linux":{"resources":{"memory":{"limit":123456789012}}}}`
	if err := decode([]byte(wantJSON), &want); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("spec (-want +got):\n%s", d)
	}

	// Nothing to drop: the bytes stay as they were.
	again, changed, err := dropCaps(out, []string{"CAP_SYS_RESOURCE"})
	if err != nil || changed || string(again) != string(out) {
		t.Errorf("second dropCaps = changed %v, %v", changed, err)
	}
	// No capabilities at all.
	if _, changed, err := dropCaps([]byte(`{"process":{"args":["x"]}}`), []string{"CAP_SYS_RESOURCE"}); err != nil || changed {
		t.Errorf("dropCaps without capabilities = changed %v, %v", changed, err)
	}
	if _, _, err := dropCaps([]byte(`{"process":{"capabilities":{"bounding":"x"}}}`), nil); err == nil {
		t.Error("dropCaps with a malformed set: no error")
	}
}

func TestEditBundle(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	spec := map[string]any{"process": map[string]any{"capabilities": map[string]any{
		"bounding": []string{"CAP_NET_ADMIN", "CAP_SYS_RESOURCE", "CAP_BPF"}}}}
	data, _ := json.Marshal(spec)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := editBundle(dir, []string{"CAP_SYS_RESOURCE", "CAP_BPF"}); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"process":{"capabilities":{"bounding":["CAP_NET_ADMIN"]}}}`; string(out) != want {
		t.Errorf("config.json = %s, want %s", out, want)
	}
	if err := editBundle(filepath.Join(dir, "missing"), nil); err == nil {
		t.Error("editBundle of a missing bundle: no error")
	}
}

func TestEditProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "process.json")
	if err := os.WriteFile(path, []byte(`{"args":["cat"],"capabilities":{"bounding":["CAP_SYS_RESOURCE","CAP_KILL"],"effective":["CAP_KILL"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := editProcess(path, []string{"CAP_SYS_RESOURCE"}); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"args":["cat"],"capabilities":{"bounding":["CAP_KILL"],"effective":["CAP_KILL"]}}`; string(out) != want {
		t.Errorf("process.json = %s, want %s", out, want)
	}
}

func TestDropList(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want []string
	}{
		{"", []string{"CAP_SYS_RESOURCE"}},
		{"sys_resource, CAP_BPF", []string{"CAP_SYS_RESOURCE", "CAP_BPF"}},
	} {
		got, err := dropList(tc.env)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("dropList(%q) (-want +got):\n%s", tc.env, d)
		}
	}
	// Every capability but CAP_SYS_RESOURCE (bit 24) present.
	got, err := missingCaps("000001fffeffffff")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"CAP_SYS_RESOURCE"}, got); d != "" {
		t.Errorf("missingCaps (-want +got):\n%s", d)
	}
	if _, err := missingCaps("zz"); err == nil {
		t.Error("missingCaps(zz): no error")
	}
}
