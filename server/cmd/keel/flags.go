package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// flagSet is a subcommand's flags with keel's usage text: a usage line and
// a one-paragraph description, printed by --help (on stdout, exit 0) and
// after a usage error (on stderr, exit 64).
type flagSet struct {
	*flag.FlagSet
	usage string // "keel run [flags] PROMPT"
	desc  string
}

func newFlagSet(name, usage, desc string) *flagSet {
	fs := flag.NewFlagSet("keel "+name, flag.ContinueOnError)
	// The flag package would print errors and usage itself; parse prints
	// them so that --help goes to stdout and errors to stderr.
	fs.SetOutput(io.Discard)
	return &flagSet{FlagSet: fs, usage: usage, desc: desc}
}

// printUsage writes the usage line, the description and the flags.
func (f *flagSet) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", f.usage, wrap(f.desc, 76))
	first := true
	f.VisitAll(func(fl *flag.Flag) {
		if first {
			fmt.Fprint(w, "\nFlags:\n")
			first = false
		}
		name, usage := flag.UnquoteUsage(fl)
		fmt.Fprintf(w, "  --%s", fl.Name)
		if name != "" {
			fmt.Fprintf(w, " %s", name)
		}
		fmt.Fprintf(w, "\n      %s", usage)
		if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "0" && !strings.Contains(usage, "(default") {
			fmt.Fprintf(w, " (default %q)", fl.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// parse parses args, allowing flags before and after positional arguments
// (`keel events S --follow`); everything after "--" is positional. It
// checks that there are between minArgs and maxArgs positional arguments
// (maxArgs < 0: no limit). When the command must stop (help, usage error)
// ok is false and code is its exit status.
func (f *flagSet) parse(args []string, stdout, stderr io.Writer, minArgs, maxArgs int) (pos []string, code int, ok bool) {
	for {
		err := f.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			f.printUsage(stdout)
			return nil, exitOK, false
		}
		if err != nil {
			return nil, f.usageError(stderr, "%v", err), false
		}
		rest := f.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	switch {
	case len(pos) < minArgs:
		return nil, f.usageError(stderr, "missing %s", missingWhat(f.usage, len(pos))), false
	case maxArgs >= 0 && len(pos) > maxArgs:
		return nil, f.usageError(stderr, "unexpected argument %q", pos[maxArgs]), false
	}
	return pos, exitOK, true
}

// usageError prints a usage error with the usage line, and returns
// exitUsage. The full help is one flag away; repeating it here would bury
// the error.
func (f *flagSet) usageError(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\nUsage: %s\nRun \"%s --help\" for the flags.\n",
		f.Name(), fmt.Sprintf(format, args...), f.usage, f.Name())
	return exitUsage
}

// missingWhat names the first missing positional argument from the usage
// line ("keel run [flags] PROMPT" → "PROMPT").
func missingWhat(usage string, have int) string {
	var names []string
	for _, w := range strings.Fields(usage) {
		if w == strings.ToUpper(w) && strings.Trim(w, "[]") == w {
			names = append(names, w)
		}
	}
	if have < len(names) {
		return "argument " + names[have]
	}
	return "argument"
}

// wrap folds text into lines of at most width columns.
func wrap(text string, width int) string {
	var b strings.Builder
	col := 0
	for _, w := range strings.Fields(text) {
		if col > 0 && col+1+len(w) > width {
			b.WriteByte('\n')
			col = 0
		} else if col > 0 {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += len(w)
	}
	return b.String()
}

// listFlag is a comma-separated list flag that remembers whether it was
// set, so an explicit empty list (--tools "") differs from the default.
type listFlag struct {
	items []string
	set   bool
}

func (l *listFlag) String() string { return strings.Join(l.items, ",") }

func (l *listFlag) Set(s string) error {
	l.set = true
	l.items = nil
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			l.items = append(l.items, item)
		}
	}
	return nil
}
