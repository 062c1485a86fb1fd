package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/keelrun/keel"
)

// attachFlag is --attach FILE, repeatable: the images and PDFs a prompt
// (or steering) carries.
type attachFlag struct{ files []string }

func (a *attachFlag) String() string { return strings.Join(a.files, ",") }

func (a *attachFlag) Set(s string) error {
	if s == "" {
		return errors.New("want a file")
	}
	a.files = append(a.files, s)
	return nil
}

func (a *attachFlag) register(fs *flagSet) {
	fs.Var(a, "attach", fmt.Sprintf("attach the image or PDF in `FILE` (PNG, JPEG, GIF, WebP up to %s, PDF up to %s; its type is read from its content); repeat for more, at most %d",
		sizeText(keel.MaxImageBytes), sizeText(keel.MaxDocumentBytes), keel.MaxAttachments))
}

// attachFile is one --attach file, read and checked.
type attachFile struct {
	path, name, mediaType string
	data                  []byte
}

// load reads and checks every file before anything is sent: a type keel
// takes, as the content says, within its kind's limit. On a bad one it
// prints the usage error, naming the file, and returns its exit status
// with ok false.
func (a *attachFlag) load(fs *flagSet, stderr io.Writer) (files []attachFile, code int, ok bool) {
	if len(a.files) > keel.MaxAttachments {
		return nil, fs.usageError(stderr, "--attach: a message carries at most %d attachments, not %d", keel.MaxAttachments, len(a.files)), false
	}
	for _, path := range a.files {
		f, err := readAttachment(path)
		if err != nil {
			return nil, fs.usageError(stderr, "--attach %s: %v", path, err), false
		}
		files = append(files, f)
	}
	return files, exitOK, true
}

// readAttachment reads the file at path, at most keel.MaxDocumentBytes of
// it, and checks it as an attachment.
func readAttachment(path string) (attachFile, error) {
	file, err := os.Open(path)
	if err != nil {
		return attachFile{}, unwrapPathError(err)
	}
	defer file.Close()
	if st, err := file.Stat(); err == nil && st.IsDir() {
		return attachFile{}, errors.New("is a directory")
	}
	// One byte past the largest limit tells a file that is over it
	// without reading all of it.
	data, err := io.ReadAll(io.LimitReader(file, keel.MaxDocumentBytes+1))
	if err != nil {
		return attachFile{}, unwrapPathError(err)
	}
	mediaType := sniffMediaType(data)
	kind, known := keel.AttachmentTypes[mediaType]
	switch {
	case len(data) == 0:
		return attachFile{}, errors.New("the file is empty")
	case !known:
		return attachFile{}, fmt.Errorf("its content is %s, not a type keel attaches (PNG, JPEG, GIF or WebP images, PDF documents)", mediaType)
	case int64(len(data)) > kind.MaxBytes():
		size := sizeText(int64(len(data)))
		if int64(len(data)) > keel.MaxDocumentBytes {
			size = "over " + sizeText(keel.MaxDocumentBytes)
		}
		return attachFile{}, fmt.Errorf("the %s is %s; the limit is %s", kind, size, sizeText(kind.MaxBytes()))
	}
	if _, err := keel.CheckAttachmentData(mediaType, data); err != nil {
		var ke *keel.Error
		if errors.As(err, &ke) {
			return attachFile{}, errors.New(strings.TrimPrefix(ke.Message, "attachment: "))
		}
		return attachFile{}, err
	}
	return attachFile{path: path, name: attachmentName(path), mediaType: mediaType, data: data}, nil
}

// unwrapPathError drops the path from an *os.PathError: the usage error
// names the file already.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// sniffMediaType is the media type data's first bytes say: "%PDF-" for a
// PDF, else what http.DetectContentType reads, without parameters.
func sniffMediaType(data []byte) string {
	if bytes.HasPrefix(data, []byte("%PDF-")) {
		return "application/pdf"
	}
	t, _, _ := strings.Cut(http.DetectContentType(data), ";")
	return t
}

// attachmentName is the name an attachment shows: the file's base name,
// with control characters replaced and clipped to keel.MaxAttachmentName
// bytes on a character boundary.
func attachmentName(path string) string {
	name := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return '?'
		}
		return r
	}, filepath.Base(path))
	for len(name) > keel.MaxAttachmentName {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

// attach stores the files in the workers' content store through the
// client and returns the references the message carries.
func attach(ctx context.Context, kc *conn, files []attachFile) ([]keel.Attachment, error) {
	var out []keel.Attachment
	for _, f := range files {
		a, err := kc.Attach(ctx, f.name, f.mediaType, f.data)
		if err != nil {
			return nil, fmt.Errorf("attach %s: %w", f.path, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// attachmentNote is how a transcript shows an attachment:
// [image: photo.png, 12 KB].
func attachmentNote(a keel.Attachment) string {
	kind := string(a.Kind)
	if kind == "" {
		kind = "attachment"
	}
	name := a.Name
	if name == "" {
		name = a.MediaType
	}
	return fmt.Sprintf("[%s: %s, %s]", sanitizeLine(kind), sanitizeLine(truncate(name, cardLineRunes)), sizeText(a.Bytes))
}

// sizeText says a size in bytes for people: 70 B, 12 KB, 3.4 MB (powers
// of 1024).
func sizeText(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%d KB", (n+1<<9)>>10)
	}
	s := fmt.Sprintf("%.1f", float64(n)/(1<<20))
	return strings.TrimSuffix(s, ".0") + " MB"
}
