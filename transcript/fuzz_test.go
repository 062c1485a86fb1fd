package transcript_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/transcript"
)

// FuzzApply feeds the reducer arbitrary JSON lines as envelopes: it must
// never panic, its view must stay encodable, and its last sequence never
// goes back.
func FuzzApply(f *testing.F) {
	// The recorded streams seed it a few lines at a time: the fuzzing
	// engine stalls on seeds of whole streams (several KiB).
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		lines := bytes.SplitAfter(data, []byte("\n"))
		for i := 0; i < len(lines); i += 4 {
			f.Add(bytes.Join(lines[i:min(i+4, len(lines))], nil))
		}
	}
	f.Add([]byte(`{"seq":1,"type":"step.started","run_id":"r","data":{"step":-3}}` + "\n" +
		`{"type":"text.delta","run_id":"r","data":{"step":-3,"attempt":99999999999,"text":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := transcript.New()
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		var last int64
		for sc.Scan() {
			var env keel.Envelope
			if json.Unmarshal(sc.Bytes(), &env) != nil {
				continue
			}
			ch := tr.Apply(env)
			if ch.Ignored == "" && ch.Run == nil && ch.Kind != transcript.KindOther && ch.Kind != transcript.KindSession {
				t.Fatalf("applied %s without a run", env.Type)
			}
			if tr.LastSeq() < last {
				t.Fatalf("last seq went from %d to %d", last, tr.LastSeq())
			}
			last = tr.LastSeq()
		}
		if _, err := json.Marshal(tr.View()); err != nil {
			t.Fatalf("view does not encode: %v", err)
		}
	})
}
