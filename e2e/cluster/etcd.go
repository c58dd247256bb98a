package cluster

import (
	"context"
	b64 "encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// etcdPost posts body to etcd's JSON gateway at /v3/kv/<path> and decodes
// the answer into out.
func (c *Cluster) etcdPost(ctx context.Context, path, body string, out any) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/v3/kv/%s", c.etcdPort, path)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("cluster: etcd %s: %w", path, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cluster: etcd %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cluster: etcd %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// CompactEtcd compacts etcd's history up to its current revision (through
// etcd's JSON gateway), so that watches from an older resource version can
// only be answered from an apiserver's watch cache. It returns the revision.
func (c *Cluster) CompactEtcd(ctx context.Context) (int64, error) {
	var r struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := c.etcdPost(ctx, "range", `{"key":"AA=="}`, &r); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(r.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cluster: etcd revision %q: %w", r.Header.Revision, err)
	}
	var ignored map[string]any
	if err := c.etcdPost(ctx, "compaction", fmt.Sprintf(`{"revision":"%d","physical":true}`, rev), &ignored); err != nil {
		return 0, err
	}
	return rev, nil
}

// PutEtcd writes value under key in etcd (through its JSON gateway),
// past the apiserver and its validation: the apiserver's storage decoder
// reads JSON-encoded objects as well as the protobuf it writes, so an
// object it would refuse can be stored under its key layout
// (/registry/services/specs/<ns>/<name>, /registry/endpointslices/<ns>/<name>)
// and is then listed and watched like any other.
func (c *Cluster) PutEtcd(ctx context.Context, key string, value []byte) error {
	body, err := json.Marshal(map[string]string{
		"key":   b64.StdEncoding.EncodeToString([]byte(key)),
		"value": b64.StdEncoding.EncodeToString(value),
	})
	if err != nil {
		return fmt.Errorf("cluster: etcd put %s: %w", key, err)
	}
	var ignored map[string]any
	if err := c.etcdPost(ctx, "put", string(body), &ignored); err != nil {
		return fmt.Errorf("cluster: etcd put %s: %w", key, err)
	}
	return nil
}
