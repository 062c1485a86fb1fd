package keel

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// Attachment is an image or a document that a message carries by
// reference: Key names its bytes in the workers' content store (written
// there by client.Attach or the gateway's POST /v1/attachments), so
// history and the transcript hold the reference, never the bytes.
type Attachment struct {
	Kind      AttachmentKind `json:"kind"`
	MediaType string         `json:"media_type"`
	// Name is what its sender called it (a file name), for display.
	// Optional.
	Name string `json:"name,omitempty"`
	// Key and Size are the content store's reference: the stored value's
	// key and its size in bytes.
	Key  string `json:"key"`
	Size int64  `json:"size"`
	// Bytes is the attachment's length.
	Bytes int64 `json:"bytes"`
	// Data is the content, read from the store on the worker for a
	// provider's request; it is never encoded.
	Data []byte `json:"-"`
}

// AttachmentKind is what an attachment is: an image or a document.
type AttachmentKind string

// The kinds of attachment.
const (
	AttachmentImage    AttachmentKind = "image"
	AttachmentDocument AttachmentKind = "document"
)

// Limits of attachments.
const (
	// MaxAttachments bounds the attachments of one message.
	MaxAttachments = 8
	// MaxImageBytes and MaxDocumentBytes bound one attachment's bytes.
	MaxImageBytes    = 5 << 20
	MaxDocumentBytes = 10 << 20
	// MaxAttachmentName bounds an attachment's name, in bytes.
	MaxAttachmentName = 256
)

// AttachmentTypes are the media types an attachment may have, by kind.
var AttachmentTypes = map[string]AttachmentKind{
	"image/png":       AttachmentImage,
	"image/jpeg":      AttachmentImage,
	"image/gif":       AttachmentImage,
	"image/webp":      AttachmentImage,
	"application/pdf": AttachmentDocument,
}

// MaxBytes is the most bytes an attachment of kind k may have.
func (k AttachmentKind) MaxBytes() int64 {
	if k == AttachmentDocument {
		return MaxDocumentBytes
	}
	return MaxImageBytes
}

// CheckAttachmentData returns the kind of an attachment of mediaType with
// data, or a *Error: CodeInvalidInput for a media type keel does not take
// or content that is not of that type (its first bytes are read, not the
// name or the caller's word), CodeTooLarge past the kind's limit.
func CheckAttachmentData(mediaType string, data []byte) (AttachmentKind, error) {
	kind, ok := AttachmentTypes[mediaType]
	if !ok {
		return "", Errorf(CodeInvalidInput, "attachment: media type %q is not one keel takes (%s)", clipName(mediaType), attachmentTypeList())
	}
	if int64(len(data)) > kind.MaxBytes() {
		return "", Errorf(CodeTooLarge, "attachment: the %s is %d bytes; the limit is %d", kind, len(data), kind.MaxBytes())
	}
	if len(data) == 0 || sniff(data) != mediaType {
		return "", Errorf(CodeInvalidInput, "attachment: the content is not %s", mediaType)
	}
	return kind, nil
}

// sniff is the media type data's first bytes say, as browsers read them.
func sniff(data []byte) string {
	if bytes.HasPrefix(data, []byte("%PDF-")) {
		return "application/pdf"
	}
	t, _, _ := strings.Cut(http.DetectContentType(data), ";")
	return t
}

// Validate checks a reference a client sent: a known media type of its
// kind, a content-store key, a size within its kind's limit and a name of
// printable text. It cannot check the bytes, which the worker checks when
// it reads them.
func (a Attachment) Validate() error {
	kind, ok := AttachmentTypes[a.MediaType]
	switch {
	case !ok:
		return Errorf(CodeInvalidInput, "attachment: media type %q is not one keel takes (%s)", clipName(a.MediaType), attachmentTypeList())
	case a.Kind != kind:
		return Errorf(CodeInvalidInput, "attachment: a %s is of kind %s, not %q", a.MediaType, kind, clipName(string(a.Kind)))
	case !validStoreKey(a.Key) || a.Size <= 0 || a.Size > 2*kind.MaxBytes():
		return Errorf(CodeInvalidInput, "attachment: not a reference to a stored attachment (use client.Attach or POST /v1/attachments)")
	case a.Bytes <= 0 || a.Bytes > kind.MaxBytes():
		return Errorf(CodeTooLarge, "attachment: the %s is %d bytes; the limit is %d", kind, a.Bytes, kind.MaxBytes())
	case !ValidAttachmentName(a.Name):
		return Errorf(CodeInvalidInput, "attachment: a name is at most %d bytes of printable text", MaxAttachmentName)
	}
	return nil
}

// CheckAttachments validates the attachments of one message.
func CheckAttachments(atts []Attachment) error {
	if len(atts) > MaxAttachments {
		return Errorf(CodeInvalidInput, "attachments: a message carries at most %d, not %d", MaxAttachments, len(atts))
	}
	for _, a := range atts {
		if err := a.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// AttachmentKinds are the distinct kinds among atts, in order.
func AttachmentKinds(msgs ...Message) []AttachmentKind {
	var out []AttachmentKind
	for _, m := range msgs {
		for _, a := range m.Attachments {
			if !slices.Contains(out, a.Kind) {
				out = append(out, a.Kind)
			}
		}
	}
	return out
}

func attachmentTypeList() string {
	return "image/png, image/jpeg, image/gif, image/webp, application/pdf"
}

// validStoreKey reports whether k is a content-store key: "sha256:" and
// 64 lowercase hex digits.
func validStoreKey(k string) bool {
	hex, ok := strings.CutPrefix(k, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range hex {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ValidAttachmentName reports whether name may name an attachment: at
// most MaxAttachmentName bytes of printable text.
func ValidAttachmentName(name string) bool {
	return len(name) <= MaxAttachmentName && utf8.ValidString(name) &&
		!strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
