package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/keelrun/keel/logging"
)

// A bad --log-format or --log-level is a usage error naming the flag and
// the values it takes, before the command does anything.
func TestLogFlagErrors(t *testing.T) {
	for _, cmd := range []string{"worker", "dev", "serve"} {
		for _, tc := range []struct{ flag, value, want string }{
			{"--log-level", "loud", `--log-level "loud": want debug, info, warn or error`},
			{"--log-level", "WARN", `--log-level "WARN": want debug, info, warn or error`},
			{"--log-format", "text", `--log-format "text": want json or console`},
		} {
			t.Run(cmd+" "+tc.flag+" "+tc.value, func(t *testing.T) {
				where := []string{"--address", closedAddress(t)}
				if cmd == "dev" {
					where = []string{"--data-dir", t.TempDir()}
				}
				code, stdout, stderr := call(t, append([]string{cmd, tc.flag, tc.value}, where...)...)
				if code != exitUsage || !bytes.Contains([]byte(stderr), []byte("keel "+cmd+": "+tc.want+"\n")) {
					t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tc.want)
				}
				if stdout != "" {
					t.Errorf("stdout %q", stdout)
				}
			})
		}
	}
}

func TestLogFlagsLogger(t *testing.T) {
	var buf bytes.Buffer
	f := logFlags{format: "json", level: "info"}
	l, opts, err := f.logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Format != logging.FormatJSON {
		t.Errorf("format %q", opts.Format)
	}
	l.Debug("below the level")
	l.Info("kept")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec["msg"] != "kept" || rec["level"] != "info" {
		t.Fatalf("record %q (%v)", buf.String(), err)
	}

	_, _, err = (&logFlags{format: "console", level: "trace"}).logger(&buf)
	var fe *flagValueError
	var ve *logging.ValueError
	if !errors.As(err, &fe) || fe.flag != "--log-level" || !errors.As(err, &ve) || ve.Value != "trace" {
		t.Fatalf("bad level: %v", err)
	}
}
