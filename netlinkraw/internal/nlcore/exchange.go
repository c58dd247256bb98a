package nlcore

// Request is one message of an Exchange: its type, flags (FlagRequest is
// added) and payload (family header and attributes).
type Request struct {
	Type    uint16
	Flags   uint16
	Payload []byte
}

// Answer is the kernel's answer to one Request of an Exchange.
type Answer struct {
	// Errno is the error the kernel answered (positive; 0: success or no
	// error seen).
	Errno int32
	// Error is a copy of the NLMSG_ERROR payload that answered the
	// request (nil: none): the error code and the request's header, with
	// its payload when the kernel copies it.
	Error []byte
	// Replies are copies of the other messages that answered it.
	Replies []Message
}

// Limits size the sendmsg calls of an Exchange.
type Limits struct {
	// Bytes caps the bytes of one sendmsg.
	Bytes int
	// Replies caps the kernel's worst-case answers to one sendmsg (a copy
	// of every message, ReplyOverhead each beyond its bytes), so that they
	// fit the socket's receive buffer.
	Replies int
}

// ReplyOverhead is what one answer costs the receive buffer beyond its
// bytes (socket buffer bookkeeping), with a margin.
const ReplyOverhead = 1024

// Exchange sends reqs, in as few sendmsg calls as lim allows, and collects
// the answer to each. Only the last message of a sendmsg asks for an
// acknowledgement unless ackAll: the kernel answers failures anyway and
// handles the messages of one sendmsg in order, so the last answer closes
// the batch. Answers to earlier, abandoned requests are skipped.
func (c *Conn) Exchange(reqs []Request, ackAll bool, lim Limits) ([]Answer, error) {
	answers := make([]Answer, len(reqs))
	for start := 0; start < len(reqs); {
		end := groupEnd(reqs, start, lim)
		group := reqs[start:end]
		first := c.NextSeq(len(group))
		last := first + uint32(len(group)) - 1
		c.Enc.Reset()
		for i, r := range group {
			flags := FlagRequest | r.Flags
			if ackAll || i == len(group)-1 {
				flags |= FlagAck
			}
			off := c.Enc.BeginMessage(r.Type, flags, first+uint32(i))
			c.Enc.B = append(c.Enc.B, r.Payload...)
			c.Enc.EndMessage(off)
		}
		if err := c.Send(c.Enc.B, len(group)); err != nil {
			return nil, err
		}
		err := c.Collect(first, last, func(m *Message) (bool, error) {
			a := &answers[start+int(m.Seq-first)]
			switch m.Type {
			case TypeError:
				a.Errno, a.Error = m.Errno, append([]byte(nil), m.Data...)
				return m.Seq == last, nil
			case TypeDone, TypeNoop, TypeOverrun:
			default:
				cp := *m
				cp.Data = append([]byte(nil), m.Data...)
				a.Replies = append(a.Replies, cp)
			}
			return false, nil
		})
		if err != nil {
			return nil, err
		}
		start = end
	}
	return answers, nil
}

// groupEnd returns the end of the group of requests from start that one
// sendmsg carries: at least one.
func groupEnd(reqs []Request, start int, lim Limits) int {
	end, size, reply := start, 0, 0
	for end < len(reqs) {
		n := HdrLen + align4(len(reqs[end].Payload))
		r := n + ReplyOverhead
		if end > start && (size+n > lim.Bytes || reply+r > lim.Replies) {
			break
		}
		size += n
		reply += r
		end++
	}
	return end
}
