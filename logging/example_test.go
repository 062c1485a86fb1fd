package logging_test

import (
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel/logging"
)

// A worker's logger: JSON records from info up on stderr, shared by the
// Temporal SDK and keel's activities; and the logger of one model turn,
// whose records carry the run's fields:
//
//	{"level":"info","ts":"…","caller":"…","msg":"model turn finished","session_id":"s1","run_id":"s1/run-2","step":3,"attempt":1,"output_tokens":42}
func Example() {
	l, err := logging.New(logging.Options{Format: logging.FormatJSON, Level: zapcore.InfoLevel})
	if err != nil {
		panic(err)
	}
	c, err := client.Dial(client.Options{Logger: logging.Temporal(l)})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	// A worker takes the same logger: worker.New(c, worker.Options{Logger: l}).

	logging.ForRun(l, "s1", "s1/run-2", 3, 1).Info("model turn finished", zap.Int("output_tokens", 42))
}
