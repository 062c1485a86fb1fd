package gateway

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
)

// MaxAttachmentBodyBytes bounds the body of POST /v1/attachments: the
// largest attachment keel takes, a document's. It replaces
// Options.MaxBodyBytes for that route alone.
const MaxAttachmentBodyBytes = keel.MaxDocumentBytes

// CodeNoContentStore refuses an upload to a gateway whose client has no
// way to the workers' content store (501).
const CodeNoContentStore = "no_content_store"

// postAttachment stores the body, an image or a PDF sent as its own media
// type, in the workers' content store (client.Attach) and answers the
// keel.Attachment reference a run or steering then carries. An upload
// names no session: any key that may write may upload, a key limited to
// a session prefix included (the reference is its content's hash, which
// tells nothing the uploader did not send).
func (g *Gateway) postAttachment(w http.ResponseWriter, r *http.Request) {
	mediaType, kind, err := attachmentType(r)
	if err != nil {
		WriteError(w, err)
		return
	}
	name := r.URL.Query().Get("name")
	if !keel.ValidAttachmentName(name) {
		WriteError(w, keel.Errorf(keel.CodeInvalidInput, "name: at most %d bytes of printable text", keel.MaxAttachmentName))
		return
	}
	if r.ContentLength > kind.MaxBytes() {
		// Refused before a byte is read.
		WriteError(w, keel.Errorf(keel.CodeTooLarge, "attachment: the %s is %d bytes; the limit is %d", kind, r.ContentLength, kind.MaxBytes()))
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, kind.MaxBytes()))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		WriteError(w, keel.Errorf(keel.CodeTooLarge, "attachment: the %s is over %d bytes, its limit", kind, tooLarge.Limit))
		return
	case err != nil:
		WriteError(w, apiError(http.StatusBadRequest, CodeBadRequest, "request body: "+err.Error()))
		return
	}
	if _, err := keel.CheckAttachmentData(mediaType, data); err != nil {
		WriteError(w, err)
		return
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	a, err := g.c.Attach(ctx, name, mediaType, data)
	if errors.Is(err, client.ErrNoContentStore) {
		WriteError(w, apiError(http.StatusNotImplemented, CodeNoContentStore,
			"this gateway has no content store to keep attachments in (keel serve --store, or a codec endpoint)"))
		return
	}
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

// attachmentType reads the media type the upload is declared as: one
// Content-Type (its parameters ignored) that keel takes, else 415.
func attachmentType(r *http.Request) (string, keel.AttachmentKind, error) {
	values := r.Header.Values("Content-Type")
	refuse := func(what string) (string, keel.AttachmentKind, error) {
		return "", "", apiError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
			fmt.Sprintf("%s; send the file as its own media type: image/png, image/jpeg, image/gif, image/webp or application/pdf", what))
	}
	if len(values) != 1 {
		return refuse("the upload needs one Content-Type")
	}
	mt, _, err := mime.ParseMediaType(values[0])
	if err != nil {
		return refuse("Content-Type is not a media type")
	}
	kind, ok := keel.AttachmentTypes[mt]
	if !ok {
		return refuse(fmt.Sprintf("%s is not a media type keel attaches", quoteShort(mt)))
	}
	return mt, kind, nil
}
