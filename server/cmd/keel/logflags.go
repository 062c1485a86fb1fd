package main

import (
	"errors"
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/keelrun/keel/logging"
)

// logFlags are --log-format and --log-level, shared by the commands that
// run keel's long-lived parts (keel worker, keel dev, keel serve).
type logFlags struct {
	format, level string
}

// register adds the flags; where says where records go ("to stderr"),
// levelNote adds to the level's help.
func (l *logFlags) register(fs *flagSet, where, levelNote string) {
	fs.StringVar(&l.format, "log-format", string(logging.FormatConsole),
		"`FORMAT` of the log records written "+where+": json (one object a line) or console")
	fs.StringVar(&l.level, "log-level", "warn",
		"`LEVEL` of the least severe log record written "+where+": debug"+levelNote+", info, warn or error")
}

// flagValueError is a bad --log-format or --log-level.
type flagValueError struct {
	flag string
	err  *logging.ValueError
}

func (e *flagValueError) Error() string {
	return fmt.Sprintf("%s %q: want %s", e.flag, e.err.Value, e.err.Want())
}

func (e *flagValueError) Unwrap() error { return e.err }

// options reads the flags into logging.Options writing to w; a bad value
// is a *flagValueError naming the flag.
func (l *logFlags) options(w io.Writer) (logging.Options, error) {
	var ve *logging.ValueError
	format, err := logging.ParseFormat(l.format)
	if errors.As(err, &ve) {
		return logging.Options{}, &flagValueError{flag: "--log-format", err: ve}
	}
	level, err := logging.ParseLevel(l.level)
	if errors.As(err, &ve) {
		return logging.Options{}, &flagValueError{flag: "--log-level", err: ve}
	}
	return logging.Options{Format: format, Level: level, Output: w}, nil
}

// logger returns the logger the flags describe, writing to w.
func (l *logFlags) logger(w io.Writer) (*zap.Logger, logging.Options, error) {
	opts, err := l.options(w)
	if err != nil {
		return nil, opts, err
	}
	zl, err := logging.New(opts)
	return zl, opts, err
}
