package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// globalFlagsWithValue are runc's global flags that take a separate value.
var globalFlagsWithValue = map[string]bool{
	"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true,
}

// parse returns runc's command, the bundle directory of create/run
// (--bundle/-b, default the working directory) and the process file of exec
// (--process/-p, empty when the process is given on the command line).
func parse(args []string) (cmd, bundle, process string) {
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		if globalFlagsWithValue[a] {
			i++
		}
	}
	if i >= len(args) {
		return "", "", ""
	}
	cmd = args[i]
	bundle = "."
	for j := i + 1; j < len(args); j++ {
		a := args[j]
		switch {
		case a == "--bundle" || a == "-b":
			if j+1 < len(args) {
				bundle = args[j+1]
			}
			j++
		case strings.HasPrefix(a, "--bundle="):
			bundle = strings.TrimPrefix(a, "--bundle=")
		case strings.HasPrefix(a, "-b="):
			bundle = strings.TrimPrefix(a, "-b=")
		case a == "--process" || a == "-p":
			if j+1 < len(args) {
				process = args[j+1]
			}
			j++
		case strings.HasPrefix(a, "--process="):
			process = strings.TrimPrefix(a, "--process=")
		}
	}
	return cmd, bundle, process
}

// capNames are the capabilities by number (linux/capability.h).
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// dropList turns RUNC_NOCAP_DROP into capability names: empty means
// CAP_SYS_RESOURCE, "auto" means those missing from this process's bounding
// set (/proc/self/status CapBnd), anything else is a comma-separated list.
func dropList(env string) ([]string, error) {
	switch env {
	case "":
		return []string{"CAP_SYS_RESOURCE"}, nil
	case "auto":
		f, err := os.Open("/proc/self/status")
		if err != nil {
			return nil, fmt.Errorf("read bounding set: %w", err)
		}
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if v, ok := strings.CutPrefix(s.Text(), "CapBnd:"); ok {
				return missingCaps(strings.TrimSpace(v))
			}
		}
		return nil, fmt.Errorf("read bounding set: no CapBnd in /proc/self/status")
	}
	var out []string
	for _, c := range strings.Split(env, ",") {
		if c = strings.ToUpper(strings.TrimSpace(c)); c != "" {
			if !strings.HasPrefix(c, "CAP_") {
				c = "CAP_" + c
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// missingCaps lists the known capabilities whose bit is clear in the hex mask.
func missingCaps(hexMask string) ([]string, error) {
	mask, err := strconv.ParseUint(hexMask, 16, 64)
	if err != nil {
		return nil, fmt.Errorf("parse bounding set %q: %w", hexMask, err)
	}
	var out []string
	for i, name := range capNames {
		if mask&(1<<uint(i)) == 0 {
			out = append(out, name)
		}
	}
	return out, nil
}

// editBundle removes the capabilities in drop from every set of
// bundle/config.json, rewriting the file only when something changed.
func editBundle(bundle string, drop []string) error {
	return editFile(filepath.Join(bundle, "config.json"), drop, dropCaps)
}

// editProcess does the same for the process file of runc exec, which holds
// an OCI process (capabilities at the top level).
func editProcess(path string, drop []string) error {
	return editFile(path, drop, dropProcessCaps)
}

func editFile(path string, drop []string, edit func([]byte, []string) ([]byte, bool, error)) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read OCI spec: %w", err)
	}
	out, changed, err := edit(data, drop)
	if err != nil {
		return fmt.Errorf("edit OCI spec %s: %w", path, err)
	}
	if !changed {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("edit OCI spec: %w", err)
	}
	if err := os.WriteFile(path, out, st.Mode().Perm()); err != nil {
		return fmt.Errorf("write OCI spec: %w", err)
	}
	return nil
}

// capSets are the capability sets of an OCI process.
var capSets = []string{"bounding", "effective", "inheritable", "permitted", "ambient"}

// dropCaps removes drop from process.capabilities in an OCI runtime spec,
// keeping every other field as it was (numbers included).
func dropCaps(spec []byte, drop []string) ([]byte, bool, error) {
	var doc map[string]json.RawMessage
	if err := decode(spec, &doc); err != nil {
		return nil, false, err
	}
	rawProc, ok := doc["process"]
	if !ok {
		return spec, false, nil
	}
	out, changed, err := dropProcessCaps(rawProc, drop)
	if err != nil || !changed {
		if err != nil {
			err = fmt.Errorf("process: %w", err)
		}
		return spec, false, err
	}
	doc["process"] = out
	out, err = json.Marshal(doc)
	return out, true, err
}

// dropProcessCaps removes drop from the capabilities of an OCI process.
func dropProcessCaps(process []byte, drop []string) ([]byte, bool, error) {
	var proc map[string]json.RawMessage
	if err := decode(process, &proc); err != nil {
		return nil, false, err
	}
	rawCaps, ok := proc["capabilities"]
	if !ok || string(rawCaps) == "null" {
		return process, false, nil
	}
	var caps map[string]json.RawMessage
	if err := decode(rawCaps, &caps); err != nil {
		return nil, false, fmt.Errorf("capabilities: %w", err)
	}
	gone := make(map[string]bool, len(drop))
	for _, d := range drop {
		gone[d] = true
	}
	changed := false
	for _, set := range capSets {
		raw, ok := caps[set]
		if !ok || string(raw) == "null" {
			continue
		}
		var names []string
		if err := json.Unmarshal(raw, &names); err != nil {
			return nil, false, fmt.Errorf("capabilities.%s: %w", set, err)
		}
		kept := names[:0:0]
		for _, n := range names {
			if !gone[n] {
				kept = append(kept, n)
			}
		}
		if len(kept) == len(names) {
			continue
		}
		changed = true
		b, err := json.Marshal(kept)
		if err != nil {
			return nil, false, err
		}
		caps[set] = b
	}
	if !changed {
		return process, false, nil
	}
	var err error
	if proc["capabilities"], err = json.Marshal(caps); err != nil {
		return nil, false, err
	}
	out, err := json.Marshal(proc)
	return out, true, err
}

func decode(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return d.Decode(v)
}
