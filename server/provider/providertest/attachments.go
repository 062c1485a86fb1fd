package providertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"

	"github.com/keelrun/keel"
)

// PDF is the smallest content keel takes as a PDF, enough for the shape
// of a request.
const PDF = "%PDF-1.4\n%%EOF\n"

// PNG is a valid 1×1 PNG image. It is stored uncompressed, so its bytes
// (and the base64 of them in golden requests) do not depend on the
// compressor.
func PNG() []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.NRGBA{R: 255, A: 255})
	var b bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.NoCompression}
	if err := enc.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// Attachment is an attachment of data as the worker hands it to a
// provider: its reference filled in and its bytes read.
func Attachment(mediaType, name string, data []byte) keel.Attachment {
	sum := sha256.Sum256(data)
	return keel.Attachment{Kind: keel.AttachmentTypes[mediaType], MediaType: mediaType, Name: name,
		Key: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data)), Bytes: int64(len(data)), Data: data}
}
