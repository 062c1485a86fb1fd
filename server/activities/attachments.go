package activities

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/lru"
	"github.com/keelrun/keel/server/tool"
)

// AttachmentStore reads and writes attachments' bytes in the content
// store (keel.Attachment). The worker's reads what client.Attach and the
// gateway stored; a read of a value that was not stored as an attachment
// fails.
type AttachmentStore interface {
	ReadAttachment(ctx context.Context, key string, size int64) (mediaType string, data []byte, err error)
	StoreAttachment(ctx context.Context, mediaType string, data []byte) (key string, size int64, err error)
}

// attachmentCacheSize bounds the attachments a worker keeps read, by
// count; with keel.MaxDocumentBytes each, at most 160 MiB.
const attachmentCacheSize = 16

// attachmentCache keeps the latest attachments read, so that a session's
// turns do not read its images again at every step.
type attachmentCache struct {
	once sync.Once
	mu   sync.Mutex
	c    *lru.Cache[[]byte]
}

// withAttachments returns msgs with the bytes of every attachment read
// from the store and checked (the copies carry them; the transcript
// cache's messages are left alone). An attachment that cannot be read, or
// whose bytes are not what it says, fails the turn permanently.
func (a *Activities) withAttachments(ctx context.Context, msgs []keel.Message) ([]keel.Message, error) {
	var out []keel.Message
	for i, m := range msgs {
		if len(m.Attachments) == 0 {
			continue
		}
		if out == nil {
			out = append([]keel.Message(nil), msgs...)
		}
		m.Attachments = append([]keel.Attachment(nil), m.Attachments...)
		for j := range m.Attachments {
			data, err := a.readAttachment(ctx, m.Attachments[j])
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, turnError(&TurnFailure{Provider: &keel.ProviderError{Provider: "keel", Kind: keel.ProviderInvalidRequest,
					Message: fmt.Sprintf("attachment %d of message %d: %v", j+1, i+1, err)}})
			}
			m.Attachments[j].Data = data
		}
		out[i] = m
	}
	if out == nil {
		return msgs, nil
	}
	return out, nil
}

// storeFiles stores the files a tool returned and returns their
// references, and a note for each one left out: of a type keel does not
// take, past keel.MaxAttachments, or with no store to keep it in.
func (a *Activities) storeFiles(ctx context.Context, files []tool.File) ([]keel.Attachment, []string) {
	var atts []keel.Attachment
	var notes []string
	for _, f := range files {
		name := clipRunes(f.Name, keel.MaxAttachmentName/4)
		kind, err := keel.CheckAttachmentData(f.MediaType, f.Data)
		switch {
		case err != nil:
			notes = append(notes, fmt.Sprintf("[%s left out: %s]", cmp.Or(name, "a file"), err.(*keel.Error).Message))
			continue
		case len(atts) == keel.MaxAttachments:
			notes = append(notes, fmt.Sprintf("[%s left out: a result shows at most %d files]", cmp.Or(name, "a file"), keel.MaxAttachments))
			continue
		case a.Attachments == nil:
			notes = append(notes, fmt.Sprintf("[%s left out: this worker has no content store]", cmp.Or(name, "a "+string(kind))))
			continue
		}
		key, size, err := a.Attachments.StoreAttachment(ctx, f.MediaType, f.Data)
		if err != nil {
			notes = append(notes, fmt.Sprintf("[%s left out: it could not be stored]", cmp.Or(name, "a "+string(kind))))
			continue
		}
		atts = append(atts, keel.Attachment{Kind: kind, MediaType: f.MediaType, Name: name, Key: key, Size: size, Bytes: int64(len(f.Data))})
	}
	return atts, notes
}

// clipRunes cuts s to at most n bytes without splitting a character, and
// drops control characters.
func clipRunes(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	for len(s) > n {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

func (a *Activities) readAttachment(ctx context.Context, att keel.Attachment) ([]byte, error) {
	a.attachments.once.Do(func() { a.attachments.c = lru.New[[]byte](attachmentCacheSize) })
	a.attachments.mu.Lock()
	data, ok := a.attachments.c.Get(att.Key)
	a.attachments.mu.Unlock()
	if !ok {
		if a.Attachments == nil {
			return nil, fmt.Errorf("this worker has no content store to read it from")
		}
		mediaType, got, err := a.Attachments.ReadAttachment(ctx, att.Key, att.Size)
		if err != nil {
			return nil, err
		}
		if mediaType != att.MediaType {
			return nil, fmt.Errorf("stored as %.40q, not %s", mediaType, att.MediaType)
		}
		data = got
	}
	if _, err := keel.CheckAttachmentData(att.MediaType, data); err != nil {
		return nil, err
	}
	a.attachments.mu.Lock()
	a.attachments.c.Put(att.Key, data)
	a.attachments.mu.Unlock()
	return data, nil
}
