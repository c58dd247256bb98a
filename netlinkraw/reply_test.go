package netlinkraw

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

func TestReplyTimeoutPolicy(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, DefaultReplyTimeout}, {-1, 0}, {time.Second, time.Second},
	} {
		if got := ReplyTimeout(tc.in); got != tc.want {
			t.Errorf("ReplyTimeout(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if !ReplyDeadline(0).IsZero() || ReplyDeadline(time.Second).IsZero() {
		t.Error("ReplyDeadline: zero only without a timeout")
	}
}

func TestReplyError(t *testing.T) {
	err := fmt.Errorf("ipvs: apply: %w", ReplyError(fmt.Errorf("recvmsg: %w", os.ErrDeadlineExceeded), time.Second))
	if !errors.Is(err, ErrReplyTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%v: not ErrReplyTimeout and os.ErrDeadlineExceeded", err)
	}
	if want := "ipvs: apply: no reply from the kernel within 1s"; err.Error() != want {
		t.Errorf("text %q, want %q", err, want)
	}
	other := errors.New("other")
	if ReplyError(other, time.Second) != other || ReplyError(nil, time.Second) != nil {
		t.Error("ReplyError changed an error that is not a timeout")
	}
}
