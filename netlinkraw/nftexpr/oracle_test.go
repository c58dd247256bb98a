package nftexpr

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// The oracle: nft v1.0.6 itself, run in check mode (-c) in a fresh network
// namespace. --debug=netlink prints the expressions in libnftnl's debug
// format; --debug=mnl prints every netlink message of the batch, which
// parseMNL turns back into bytes.

// runNFT runs `nft -c --debug=<debug> -f script` in a fresh namespace and
// returns its standard output.
func runNFT(t testing.TB, script, debug string) string {
	t.Helper()
	nft := nstest.LookPath(t, "nft")
	ns := nstest.New(t)
	f, err := os.CreateTemp(t.TempDir(), "*.nft")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(script); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var stdout, stderr bytes.Buffer
	err = ns.Do(func() error {
		cmd := exec.Command(nft, "-c", "--debug="+debug, "-f", f.Name())
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd.Run()
	})
	if err != nil {
		t.Fatalf("nft -c --debug=%s: %v: %s\nscript:\n%s", debug, err, stderr.String(), script)
	}
	return stdout.String()
}

// mnlMsg is one netlink message of nft's batch: its type, flags and the
// payload after the netlink header (nfgenmsg included).
type mnlMsg struct {
	Type, Flags uint16
	Data        []byte
}

var (
	ansi       = regexp.MustCompile("\x1b\\[[0-9;]*m")
	mnlLen     = regexp.MustCompile(`^\|\s+(\d{10})\s+\|\t\| message length \|`)
	mnlType    = regexp.MustCompile(`^\| (\d{5}) \| ([RMAE-]{4}) \|\t\|  type \| flags  \|`)
	mnlWord    = regexp.MustCompile(`^\| ([0-9a-f]{2}) ([0-9a-f]{2}) ([0-9a-f]{2}) ([0-9a-f]{2})  \|\t\|\s+(data|extra header)\s+\|`)
	mnlAttr    = regexp.MustCompile(`^\|(\d{5})\|([N-])([B-])\|(\d{5})\|\t\|len \|flags\| type\|`)
	mnlSkipped = regexp.MustCompile(`^\|\s+\d{10}\s+\|\t\| (sequence number|    port ID    )\|`)
)

// parseMNL rebuilds the messages libmnl printed with --debug=mnl.
func parseMNL(t testing.TB, out string) []mnlMsg {
	t.Helper()
	var (
		msgs []mnlMsg
		cur  *mnlMsg
		want int
	)
	flush := func() {
		if cur == nil {
			return
		}
		if len(cur.Data)+nlcore.HdrLen != want {
			t.Fatalf("mnl dump: message type %d: rebuilt %d bytes, header says %d", cur.Type, len(cur.Data)+nlcore.HdrLen, want)
		}
		msgs = append(msgs, *cur)
		cur = nil
	}
	sc := bufio.NewScanner(strings.NewReader(ansi.ReplaceAllString(out, "")))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case mnlLen.MatchString(line):
			flush()
			want, _ = strconv.Atoi(mnlLen.FindStringSubmatch(line)[1])
			cur = &mnlMsg{}
		case cur == nil:
		case mnlType.MatchString(line):
			m := mnlType.FindStringSubmatch(line)
			typ, _ := strconv.Atoi(m[1])
			cur.Type = uint16(typ)
			for i, c := range "RMAE" {
				if m[2][i] == byte(c) {
					cur.Flags |= 1 << i
				}
			}
		case mnlWord.MatchString(line):
			m := mnlWord.FindStringSubmatch(line)
			for _, h := range m[1:5] {
				v, _ := strconv.ParseUint(h, 16, 8)
				cur.Data = append(cur.Data, byte(v))
			}
		case mnlAttr.MatchString(line):
			m := mnlAttr.FindStringSubmatch(line)
			l, _ := strconv.Atoi(m[1])
			typ, _ := strconv.Atoi(m[4])
			if m[2] == "N" {
				typ |= nlcore.AttrNested
			}
			if m[3] == "B" {
				typ |= nlcore.AttrNetByteOrder
			}
			cur.Data = binary.NativeEndian.AppendUint16(cur.Data, uint16(l))
			cur.Data = binary.NativeEndian.AppendUint16(cur.Data, uint16(typ))
		case mnlSkipped.MatchString(line), strings.HasPrefix(line, "----------------"):
		default:
			t.Fatalf("mnl dump: unknown line %q", line)
		}
	}
	flush()
	return msgs
}

// batchMsgs returns the messages of the batch (between batch begin and
// end), skipping the cache dumps before it.
func batchMsgs(msgs []mnlMsg) []mnlMsg {
	for i, m := range msgs {
		if m.Type == 0x10 { // NFNL_MSG_BATCH_BEGIN
			rest := msgs[i+1:]
			for j, m := range rest {
				if m.Type == 0x11 {
					return rest[:j]
				}
			}
			return rest
		}
	}
	return nil
}
