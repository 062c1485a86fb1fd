package hook_test

import (
	"errors"
	"testing"
	"time"

	"github.com/keelrun/keel/server/hook"
)

var (
	testSecret = []byte("whsec-test")
	testTime   = time.Unix(1700000000, 0)
)

// The header is the documented one, byte for byte: a receiver in another
// language computes the same HMAC over "<t>.<body>".
func TestSignKnownVector(t *testing.T) {
	got := hook.Sign(testSecret, testTime, []byte(`{"hook":"audit"}`))
	want := "t=1700000000,v1=6238135b1527d6a7142533f86fdc01acfcb2e20b84083c76706b94a32df1c137"
	if got != want {
		t.Fatalf("Sign = %s\nwant %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	body := []byte(`{"hook":"audit","point":"before_tool"}`)
	header := hook.Sign(testSecret, testTime, body)
	other := hook.Sign([]byte("old-secret"), testTime, body)
	for _, tc := range []struct {
		name      string
		secret    []byte
		header    string
		body      string
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{name: "genuine", header: header, now: testTime.Add(time.Minute)},
		{name: "genuine, in a tolerance of its own", header: header, now: testTime.Add(9 * time.Minute), tolerance: 10 * time.Minute},
		{name: "rotating: two v1, one matches", header: other + ",v1=" + header[len("t=1700000000,v1="):], now: testTime},
		{name: "spaces and unknown schemes", header: " t=1700000000 , v0=zz, " + header[len("t=1700000000,"):], now: testTime},
		{name: "body changed", header: header, body: `{"hook":"audit","point":"after_tool"}`, now: testTime, want: hook.ErrSignatureMismatch},
		{name: "other secret", secret: []byte("guess"), header: header, now: testTime, want: hook.ErrSignatureMismatch},
		{name: "time changed", header: "t=1700000001" + header[len("t=1700000000"):], now: testTime, want: hook.ErrSignatureMismatch},
		{name: "replayed late", header: header, now: testTime.Add(hook.SignatureTolerance + time.Second), want: hook.ErrSignatureExpired},
		{name: "from the future", header: header, now: testTime.Add(-hook.SignatureTolerance - time.Second), want: hook.ErrSignatureExpired},
		{name: "no time", header: header[len("t=1700000000,"):], now: testTime, want: hook.ErrSignatureHeader},
		{name: "no v1", header: "t=1700000000", now: testTime, want: hook.ErrSignatureHeader},
		{name: "two times", header: "t=1," + header, now: testTime, want: hook.ErrSignatureHeader},
		{name: "short v1", header: "t=1700000000,v1=abcd", now: testTime, want: hook.ErrSignatureHeader},
		{name: "not hex", header: "t=1700000000,v1=" + string(make([]byte, 64)), now: testTime, want: hook.ErrSignatureHeader},
		{name: "empty", header: "", now: testTime, want: hook.ErrSignatureHeader},
		{name: "no secret", secret: []byte{}, header: header, now: testTime, want: hook.ErrNoSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret, b := testSecret, body
			if tc.secret != nil {
				secret = tc.secret
			}
			if tc.body != "" {
				b = []byte(tc.body)
			}
			err := hook.Verify(secret, tc.header, b, tc.now, tc.tolerance)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}
