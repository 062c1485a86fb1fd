package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

const historyDesc = `Prints the committed transcript of SESSION: each message under a role
header, the assistant's tool calls with their arguments, the first lines
of each tool result, and a message's attachments as [image: NAME, SIZE]. It reads one page of at most --limit messages from
--offset and says how to read the next. --json prints the page as JSON
(messages, offset, total, revision) instead.`

// historyResultLines is how much of a tool result the transcript shows.
const historyResultLines = 6

func cmdHistory(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("history", "keel history [flags] SESSION", historyDesc)
	var conn connFlags
	conn.register(fs, false)
	offset := fs.Int("offset", 0, "first message to print, from 0")
	limit := fs.Int("limit", 0, fmt.Sprintf("most messages to print (default %d)", api.DefaultHistoryLimit))
	asJSON := fs.Bool("json", false, "print the page as JSON")
	pos, code, ok := fs.parse(args, stdout, stderr, 1, 1)
	if !ok {
		return code
	}
	if err := keel.ValidateSessionID(pos[0]); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	if *offset < 0 || *limit < 0 {
		return fs.usageError(stderr, "--offset and --limit must be 0 or more")
	}
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "history", err)
	}
	defer kc.close()
	page, err := kc.Session(pos[0]).History(ctx, *offset, *limit)
	if err != nil {
		return fail(stderr, "history", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		_ = enc.Encode(page)
		return exitOK
	}
	writeTranscript(stdout, page, useColor(stdout))
	return exitOK
}

// writeTranscript prints a history page for people.
func writeTranscript(w io.Writer, page api.HistoryPage, color bool) {
	r := newRenderer(w, renderOptions{color: color})
	for i, m := range page.Messages {
		if i > 0 {
			r.write("", "\n")
		}
		r.line(styleBold, "── %s", roleHeader(m))
		switch m.Role {
		case keel.RoleTool:
			lines := strings.Split(strings.TrimRight(sanitize(m.Content), "\n"), "\n")
			for j, l := range lines {
				if j == historyResultLines {
					r.line(styleDim, "… %d more %s", len(lines)-j, plural(len(lines)-j, "line", "lines"))
					break
				}
				r.line("", "%s", truncate(strings.ReplaceAll(l, "\t", "    "), cardLineRunes))
			}
		default:
			if c := strings.TrimRight(sanitize(m.Content), "\n"); c != "" {
				r.write("", c+"\n")
			}
			for _, c := range m.ToolCalls {
				r.line(styleCyan, "→ %s %s", sanitizeLine(c.Name), compactArgs(c.Arguments))
			}
		}
		// Attachments by reference: what and how large, never the bytes.
		for _, a := range m.Attachments {
			r.line(styleDim, "%s", attachmentNote(a))
		}
	}
	first, last := page.Offset, page.Offset+len(page.Messages)
	if len(page.Messages) == 0 {
		r.line(styleDim, "(no messages from %d; the transcript has %d, revision %d)", page.Offset, page.Total, page.Revision)
		return
	}
	r.write("", "\n")
	r.line(styleDim, "messages %d–%d of %d · revision %d", first, last-1, page.Total, page.Revision)
	if last < page.Total {
		r.line(styleDim, "more: --offset %d", last)
	}
}

func roleHeader(m keel.Message) string {
	switch m.Role {
	case keel.RoleTool:
		status := string(m.ToolStatus)
		if status == "" {
			status = "?"
		}
		return fmt.Sprintf("tool %s · %s · %s", sanitizeLine(m.ToolName), sanitizeLine(status), sanitizeLine(m.ToolCallID))
	case keel.RoleAssistant:
		if m.Aborted {
			return "assistant (cut short)"
		}
	case keel.RoleUser:
		if m.SteeringID != "" {
			return "user (steering " + sanitizeLine(m.SteeringID) + ")"
		}
	}
	return sanitizeLine(string(m.Role))
}
