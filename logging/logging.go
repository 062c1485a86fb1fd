package logging

import (
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Format is how records are written.
type Format string

const (
	// FormatConsole writes one line a record for a person: time, level,
	// message, then the fields as JSON.
	FormatConsole Format = "console"
	// FormatJSON writes one JSON object a record, for a log pipeline.
	FormatJSON Format = "json"
)

// Formats and Levels are the values ParseFormat and ParseLevel accept.
var (
	Formats = []string{string(FormatJSON), string(FormatConsole)}
	Levels  = []string{"debug", "info", "warn", "error"}
)

// Options configures New. Every field is optional.
type Options struct {
	// Format of the records. Default FormatConsole.
	Format Format
	// Level is the least severe record written. Default zapcore.InfoLevel
	// (the zero value).
	Level zapcore.Level
	// Output receives the records. Default os.Stderr.
	Output io.Writer
}

// ValueError is a format or level that keel does not know; Setting names
// what was being set ("log format", "log level").
type ValueError struct {
	Setting string
	Value   string
	Valid   []string
}

func (e *ValueError) Error() string {
	return fmt.Sprintf("logging: %s %q: want %s", e.Setting, e.Value, e.Want())
}

// Want spells the valid values: "debug, info, warn or error".
func (e *ValueError) Want() string { return orList(e.Valid) }

// orList spells "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// ParseFormat reads a format name: "json" or "console". Anything else is a
// *ValueError.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatJSON, FormatConsole:
		return f, nil
	}
	return "", &ValueError{Setting: "log format", Value: s, Valid: Formats}
}

// ParseLevel reads a level name: debug, info, warn or error. Anything else
// (zap's dpanic, panic and fatal included: keel never logs at them) is a
// *ValueError.
func ParseLevel(s string) (zapcore.Level, error) {
	switch s {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info":
		return zapcore.InfoLevel, nil
	case "warn":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return zapcore.InfoLevel, &ValueError{Setting: "log level", Value: s, Valid: Levels}
}

// New returns a logger as opts say. A format other than FormatJSON and
// FormatConsole is a *ValueError.
func New(opts Options) (*zap.Logger, error) {
	if opts.Format == "" {
		opts.Format = FormatConsole
	}
	if opts.Output == nil {
		opts.Output = os.Stderr
	}
	enc, err := NewEncoder(opts.Format)
	if err != nil {
		return nil, err
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(opts.Output)), opts.Level)
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(zapcore.Lock(zapcore.AddSync(opts.Output)))), nil
}

// NewEncoder returns the encoder of format, for callers that build their
// own zapcore.Core (to tee records elsewhere, say).
func NewEncoder(format Format) (zapcore.Encoder, error) {
	cfg := zapcore.EncoderConfig{
		TimeKey:        "ts",
		LevelKey:       "level",
		NameKey:        "logger",
		CallerKey:      "caller",
		MessageKey:     "msg",
		StacktraceKey:  "stacktrace",
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeLevel:    zapcore.LowercaseLevelEncoder,
		EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
		EncodeDuration: zapcore.StringDurationEncoder,
		EncodeCaller:   zapcore.ShortCallerEncoder,
	}
	switch format {
	case FormatJSON:
		return zapcore.NewJSONEncoder(cfg), nil
	case FormatConsole:
		cfg.EncodeLevel = zapcore.CapitalLevelEncoder
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		return zapcore.NewConsoleEncoder(cfg), nil
	}
	return nil, &ValueError{Setting: "log format", Value: string(format), Valid: Formats}
}

// Default is the logger of a library caller that gave none: warnings and
// errors as console text on stderr.
func Default() *zap.Logger {
	l, _ := New(Options{Format: FormatConsole, Level: zapcore.WarnLevel})
	return l
}
