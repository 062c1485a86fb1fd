package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// pixelPNG is a real PNG: one red pixel.
func pixelPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writeFile writes data to name in dir and returns its path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAttachRefusals: --attach refuses, as a usage error naming the file
// and before anything is dialled (no server runs here), a file whose
// content is not a type keel takes, one over its kind's limit, one that is
// not there, and more files than a message carries.
func TestAttachRefusals(t *testing.T) {
	ctx := withNoInput(context.Background())
	dir := t.TempDir()
	text := writeFile(t, dir, "notes.txt", []byte("just some notes\n"))
	// A PNG by its first bytes, a byte over the images' limit.
	big := writeFile(t, dir, "big.png", append(pixelPNG(t), make([]byte, keel.MaxImageBytes)...))
	// A PDF over the documents' limit: read only to the limit.
	huge := writeFile(t, dir, "huge.pdf", append([]byte("%PDF-1.7\n"), make([]byte, keel.MaxDocumentBytes)...))
	// A PNG named as a PDF: the content decides, and it passes.
	disguised := writeFile(t, dir, "pixel.pdf", pixelPNG(t))
	pngFile := writeFile(t, dir, "pixel.png", pixelPNG(t))
	// No server listens here: a file that passed would fail to dial.
	conn := []string{"--address", "127.0.0.1:1", "--codec-endpoint", ""}

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"text", []string{"run", "--attach", text, "hi"}, "--attach " + text + ": its content is text/plain, not a type keel attaches"},
		{"text to send", []string{"send", "--attach", pngFile, "--attach", text, "hi"}, "--attach " + text + ": its content is text/plain"},
		{"image too large", []string{"run", "--attach", big, "hi"}, "--attach " + big + ": the image is 5 MB; the limit is 5 MB"},
		{"document too large", []string{"send", "--attach", huge, "hi"}, "--attach " + huge + ": the document is over 10 MB; the limit is 10 MB"},
		{"missing", []string{"run", "--attach", filepath.Join(dir, "nowhere.png"), "hi"}, "nowhere.png: no such file or directory"},
		{"directory", []string{"run", "--attach", dir, "hi"}, "--attach " + dir + ": is a directory"},
		{"too many", append(append([]string{"run"}, repeatFlag("--attach", pngFile, keel.MaxAttachments+1)...), "hi"),
			"--attach: a message carries at most 8 attachments, not 9"},
		{"steer", []string{"steer", "--attach", text, "s1", "more"}, "--attach " + text + ": its content is text/plain"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append(append([]string{c.args[0]}, conn...), c.args[1:]...)
			code, out, errOut := keelCmd(ctx, args...)
			if code != exitUsage {
				t.Fatalf("status %d, want %d (usage)\nstdout: %s\nstderr: %s", code, exitUsage, out, errOut)
			}
			if !strings.Contains(errOut, c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, errOut)
			}
			if strings.Contains(errOut, "dial") || strings.Contains(errOut, "127.0.0.1:1") {
				t.Errorf("a refused file was sent for:\n%s", errOut)
			}
		})
	}

	t.Run("content decides", func(t *testing.T) {
		f, err := readAttachment(disguised)
		if err != nil || f.mediaType != "image/png" || f.name != "pixel.pdf" {
			t.Errorf("a PNG named .pdf: %+v, %v; want image/png", f, err)
		}
	})
}

// repeatFlag is flag value, n times.
func repeatFlag(flag, value string, n int) []string {
	var out []string
	for range n {
		out = append(out, flag, value)
	}
	return out
}

// TestAttachNames: an attachment's name is the file's base name, made
// printable and clipped to keel.MaxAttachmentName bytes on a character
// boundary; sizes read as people read them.
func TestAttachNames(t *testing.T) {
	long := strings.Repeat("é", 200) + ".png" // 404 bytes
	for path, want := range map[string]string{
		"/tmp/photos/cat.png": "cat.png",
		"dir/a\tb.png":        "a?b.png",
		"x/" + long:           strings.Repeat("é", 128),
	} {
		if got := attachmentName(path); got != want {
			t.Errorf("attachmentName(%q) = %q, want %q", path, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0 B", 70: "70 B", 1023: "1023 B", 1024: "1 KB", 12 * 1024: "12 KB",
		1536: "2 KB", 5 << 20: "5 MB", 3*(1<<20) + 400*1024: "3.4 MB"} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %q, want %q", n, got, want)
		}
	}
	a := keel.Attachment{Kind: keel.AttachmentImage, MediaType: "image/png", Name: "cat\x1b[31m.png", Bytes: 12 * 1024}
	if got := attachmentNote(a); got != "[image: cat[31m.png, 12 KB]" {
		t.Errorf("attachmentNote = %q: want the name without its escape", got)
	}
}

// TestAttachCommands runs keel run, send and steer with --attach against
// a keel dev stack whose content store is a directory: through its codec
// endpoint (keel dev's way) and through the store itself (--store). The
// runs complete, which takes the worker reading the stored bytes back for
// the model; the session's history holds each attachment by reference (its
// kind, media type, sha256 key and sizes, never the bytes), and keel
// history shows it as [image: NAME, SIZE].
func TestAttachCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 3*time.Minute)
	defer cancel()
	storeDir := t.TempDir()
	stack, err := startDevStack(ctx, devConfig{scripts: testScripts(), noUI: true, workspace: t.TempDir(), store: "file://" + storeDir,
		logger: quietLogger(), logLevel: zapcore.ErrorLevel})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stack.stop() }()
	dir := t.TempDir()
	pixel := pixelPNG(t)
	pngFile := writeFile(t, dir, "pixel.png", pixel)
	pdf := []byte("%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n")
	pdfFile := writeFile(t, dir, "brief.pdf", pdf)
	model := writeScript(t, `{"repeat":true,"turns":[{"text":["I see it."]}]}`)
	sleepy := writeScript(t, `{"turns":[{"tool_calls":[{"id":"z1","name":"sleep","arguments":{"seconds":3600}}]},{"text":["Woke."]}]}`)
	viaEndpoint := []string{"--address", stack.server.Address(), "--codec-endpoint", stack.codecURL}
	viaStore := []string{"--address", stack.server.Address(), "--store", "file://" + storeDir}
	cli := func(wantCode int, cmd string, conn []string, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := keelCmd(ctx, append(append([]string{cmd}, conn...), args...)...)
		if code != wantCode {
			t.Fatalf("keel %s %s: status %d, want %d\nstdout: %s\nstderr: %s", cmd, strings.Join(args, " "), code, wantCode, out, errOut)
		}
		return out, errOut
	}
	history := func(session string) []keel.Message {
		t.Helper()
		out, _ := cli(exitOK, "history", viaEndpoint, "--json", session)
		var page api.HistoryPage
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatal(err)
		}
		return page.Messages
	}
	c, err := client.Dial(ctx, client.Options{HostPort: stack.server.Address(), Namespace: stack.server.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	key := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	checkRef := func(t *testing.T, a keel.Attachment, kind keel.AttachmentKind, mediaType, name string, data []byte) {
		t.Helper()
		if a.Kind != kind || a.MediaType != mediaType || a.Name != name || a.Bytes != int64(len(data)) ||
			!key.MatchString(a.Key) || a.Size <= 0 || a.Data != nil {
			t.Errorf("attachment %+v: want a %s %s named %s of %d bytes by a sha256 key", a, kind, mediaType, name, len(data))
		}
	}

	t.Run("run", func(t *testing.T) {
		cli(exitOK, "run", append(viaEndpoint, "--nats", ""), "--session", "att-run", "--model", model, "--tools", "",
			"--attach", pngFile, "--attach", pdfFile, "What is in these?")
		msgs := history("att-run")
		if len(msgs) != 2 || msgs[0].Role != keel.RoleUser || len(msgs[0].Attachments) != 2 {
			t.Fatalf("history: %+v; want the prompt with two attachments, then the answer", msgs)
		}
		checkRef(t, msgs[0].Attachments[0], keel.AttachmentImage, "image/png", "pixel.png", pixel)
		checkRef(t, msgs[0].Attachments[1], keel.AttachmentDocument, "application/pdf", "brief.pdf", pdf)
		if msgs[1].Content != "I see it." {
			t.Errorf("answer %q", msgs[1].Content)
		}
		out, _ := cli(exitOK, "history", viaEndpoint, "att-run")
		want := fmt.Sprintf("── user\nWhat is in these?\n[image: pixel.png, %d B]\n[document: brief.pdf, %d B]\n", len(pixel), len(pdf))
		if !strings.Contains(out, want) {
			t.Errorf("keel history lacks %q:\n%s", want, out)
		}
	})

	t.Run("send through the store", func(t *testing.T) {
		out, _ := cli(exitOK, "send", viaStore, "--session", "att-send", "--model", model, "--tools", "", "--attach", pngFile, "Look.")
		var res sendResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if out, err := c.Session("att-send").Run(res.Number).Outcome(ctx); err != nil || out.Status != keel.StatusCompleted {
			t.Fatalf("the sent run: %+v, %v", out, err)
		}
		msgs := history("att-send")
		if len(msgs) != 2 || len(msgs[0].Attachments) != 1 {
			t.Fatalf("history: %+v", msgs)
		}
		checkRef(t, msgs[0].Attachments[0], keel.AttachmentImage, "image/png", "pixel.png", pixel)
		// The same bytes, stored twice, are one value of the store.
		first := history("att-run")[0].Attachments[0]
		if msgs[0].Attachments[0].Key != first.Key {
			t.Errorf("the same PNG under keys %s and %s", msgs[0].Attachments[0].Key, first.Key)
		}
	})

	t.Run("steer", func(t *testing.T) {
		out, _ := cli(exitOK, "send", viaEndpoint, "--session", "att-steer", "--model", sleepy, "--tools", "sleep", "Sleep.")
		var res sendResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		cli(exitOK, "steer", viaEndpoint, "--attach", pngFile, "att-steer", "And this?")
		cli(exitOK, "cancel", viaEndpoint, "att-steer")
	})

	t.Run("no content store", func(t *testing.T) {
		_, errOut := cli(exitFailed, "send", []string{"--address", stack.server.Address(), "--codec-endpoint", ""},
			"--session", "att-none", "--model", model, "--attach", pngFile, "Look.")
		for _, want := range []string{"attach " + pngFile, "content store", "--store"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr lacks %q:\n%s", want, errOut)
			}
		}
	})
}
