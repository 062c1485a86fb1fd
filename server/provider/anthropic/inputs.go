package anthropic

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// noDocuments are the model families that read no PDFs (the claude-3
// family and older); noImages those that read no images either.
var (
	noDocuments = []string{"claude-3-haiku", "claude-3-opus", "claude-3-sonnet", "claude-2", "claude-instant"}
	noImages    = []string{"claude-2", "claude-instant"}
)

// CheckInputs implements provider.InputChecker. With Config.Inputs set,
// every model reads exactly those kinds; otherwise every current Claude
// model reads images and PDFs, the claude-3 family (claude-3-haiku,
// -opus, -sonnet) images only, and claude-2 and claude-instant neither.
func (p *Provider) CheckInputs(model string, kinds []keel.AttachmentKind) error {
	for _, k := range kinds {
		if !p.reads(model, k) {
			return keel.Errorf(keel.CodeInvalidInput, "attachments: %.64s reads no %s", model, provider.KindNoun(k))
		}
	}
	return nil
}

func (p *Provider) reads(model string, k keel.AttachmentKind) bool {
	if p.cfg.Inputs != nil {
		return slices.Contains(p.cfg.Inputs, k)
	}
	family := func(fs []string) bool {
		return slices.ContainsFunc(fs, func(f string) bool { return strings.HasPrefix(model, f) })
	}
	switch k {
	case keel.AttachmentImage:
		return !family(noImages)
	case keel.AttachmentDocument:
		return !family(noDocuments)
	}
	return false
}

// attachmentBlock is the block of attachment j of message i: an image
// or a PDF document, its bytes in base64. An attachment without its bytes
// (the worker reads them in before the request) is refused, never sent.
func attachmentBlock(i, j int, a keel.Attachment) (sdk.ContentBlockParamUnion, error) {
	kind, ok := keel.AttachmentTypes[a.MediaType]
	switch {
	case !ok:
		return sdk.ContentBlockParamUnion{}, invalidRequest("message %d: attachment %d is a %.40q, not a kind keel sends", i, j, a.MediaType)
	case len(a.Data) == 0:
		return sdk.ContentBlockParamUnion{}, invalidRequest("message %d: attachment %d has no content (its bytes were not read)", i, j)
	}
	data := base64.StdEncoding.EncodeToString(a.Data)
	if kind == keel.AttachmentImage {
		return sdk.NewImageBlockBase64(a.MediaType, data), nil
	}
	b := sdk.NewDocumentBlock(sdk.Base64PDFSourceParam{Data: data})
	if a.Name != "" {
		b.OfDocument.Title = param.NewOpt(a.Name)
	}
	return b, nil
}

func invalidRequest(format string, args ...any) error {
	return &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest, Message: fmt.Sprintf(format, args...)}
}
